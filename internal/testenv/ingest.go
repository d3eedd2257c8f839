package testenv

import "weft/db"

// Ingesting reports whether any of docs is still queued or being
// processed, for tests that wait until a knowledge base has settled.
func Ingesting(docs []db.Document) bool {
	for _, d := range docs {
		if d.Status == db.DocQueued || d.Status == db.DocProcessing {
			return true
		}
	}
	return false
}
