package views

import (
	"fmt"

	"weft/db"
	"weft/internal/usererr"
)

func importName(imp db.Import) string {
	name := imp.FileName
	if name == "" {
		name = "an export"
	}
	return fmt.Sprintf("%s (%s)", name, map[string]string{"chatgpt": "ChatGPT", "openwebui": "Open WebUI"}[imp.Format])
}

// importStatus says where an import is, in words.
func importStatus(imp db.Import) string {
	switch imp.Status {
	case db.ImportQueued:
		return "Waiting to start…"
	case db.ImportRunning:
		if imp.Total == nil {
			return "Counting the conversations…"
		}
		return fmt.Sprintf("Importing: %d of %d conversations (%d imported, %d skipped)…", imp.NextIndex, *imp.Total, imp.Imported, imp.Skipped)
	case db.ImportFailed:
		return fmt.Sprintf("Stopped: %d conversations imported, %d skipped.", imp.Imported, imp.Skipped)
	default:
		return fmt.Sprintf("Done: %d conversations imported, %d skipped.", imp.Imported, imp.Skipped)
	}
}

func itemStatus(it db.ImportItem) string {
	if it.Imported {
		return "imported"
	}
	return "skipped"
}

func countItems(items []db.ImportItem, imported bool) int {
	n := 0
	for _, it := range items {
		if it.Imported == imported {
			n++
		}
	}
	return n
}

func sizeText(n int64) string { return usererr.Size(n) }
