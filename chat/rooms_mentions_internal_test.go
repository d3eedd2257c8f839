package chat

import (
	"strings"
	"testing"

	"weft/db"
)

func TestMentionsNameAgentsInOrderOfFirstMentionOutsideCodeAndAddresses(t *testing.T) {
	agents := []db.RoomAgent{{ID: 1, Name: "Writer"}, {ID: 2, Name: "critic"}, {ID: 3, Name: "re-viewer_2"}}
	def := int64(2)
	cases := []struct {
		text string
		def  *int64
		want string
	}{
		{"@critic then @Writer", nil, "critic Writer"},
		{"@WRITER, @writer and @critic: go", nil, "Writer critic"},
		{"ask (@re-viewer_2) now", nil, "re-viewer_2"},
		{"mail max@writer.example or me_@critic", nil, ""},
		{"@writers is not @writer-", nil, "Writer"},
		{"`@writer` and\n```\n@critic\n```\nhi", nil, ""},
		{"no mention here", nil, ""},
		{"no mention here", &def, "critic"},
		{"@bob, what do you think?", &def, "critic"},
		{"@writer only", &def, "Writer"},
		{"@" + strings.Repeat("a", 40), nil, ""},
	}
	for _, c := range cases {
		var names []string
		for _, a := range routeMessage(c.text, agents, c.def) {
			names = append(names, a.Name)
		}
		if got := strings.Join(names, " "); got != c.want {
			t.Errorf("routeMessage(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}
