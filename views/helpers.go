package views

import (
	"encoding/json"
	"net/http"

	"weft/db"
)

func statusTitle(code int) string {
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Error"
}

func boolValue(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// messageRoute is the route recorded on a message's metadata ("" for user
// messages).
func messageRoute(m db.Message) string {
	var meta struct {
		Route string `json:"route"`
	}
	_ = json.Unmarshal(m.Metadata, &meta)
	return meta.Route
}
