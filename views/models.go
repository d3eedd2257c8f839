package views

import (
	"net/url"
	"strconv"

	"weft/db"
	"weft/internal/usererr"
)

// EventPull replaces a running pull's progress on /admin/models (the
// stream GET /admin/models/pulls/{id}/events); EventDone ends it with the
// pull's final row.
const EventPull = "pull"

func queryEscape(s string) string { return url.QueryEscape(s) }

// sizeOf is a byte count for people ("4.7 GB"); "" for 0.
func sizeOf(n int64) string {
	if n <= 0 {
		return ""
	}
	return usererr.Size(n)
}

// gpuShare says how much of a loaded model is on the GPU.
func gpuShare(size, vram int64) string {
	switch {
	case size <= 0 || vram <= 0:
		return "none (CPU)"
	case vram >= size:
		return "all"
	}
	return strconv.FormatInt(vram*100/size, 10) + "%"
}

func pullStatus(s string) string {
	switch s {
	case db.PullRunning:
		return "pulling"
	case db.PullCompleted:
		return "done"
	}
	return s
}

// pullBytes is "1.2 GB of 4.7 GB (25%)".
func pullBytes(p db.ModelPull) string {
	if p.Total <= 0 {
		return ""
	}
	return usererr.Size(p.Completed) + " of " + usererr.Size(p.Total) + " (" + strconv.FormatInt(p.Completed*100/p.Total, 10) + "%)"
}

// shortDigest is how Ollama names a layer: 12 hex digits of its digest.
func shortDigest(d string) string {
	if len(d) >= 19 && d[:7] == "sha256:" {
		return d[7:19]
	}
	return d
}
