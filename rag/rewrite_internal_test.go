package rag

import (
	"slices"
	"strings"
	"testing"

	"weft/db"
)

func TestParseRewritesKeepsOnlyNewShortQueries(t *testing.T) {
	const question = "How do trams work?"
	for _, tc := range []struct {
		name, reply string
		want        []string
		err         bool
	}{
		{"a clean reply", `{"queries":["tram network", "streetcar operation"]}`, []string{"tram network", "streetcar operation"}, false},
		{"fenced JSON", "```json\n{\"queries\":[\"tram network\"]}\n```", []string{"tram network"}, false},
		{"the question echoed, spaced and cased otherwise", `{"queries":[" how do  TRAMS work? "]}`, nil, false},
		{"repeats, blanks and white space", `{"queries":["tram\tnetwork", "Tram network", "  ", "tram\nlines"]}`, []string{"tram network", "tram lines"}, false},
		{"too many", `{"queries":["a1","a2","a3","a4"]}`, []string{"a1", "a2", "a3"}, false},
		{"an overlong one and a control character", `{"queries":["` + strings.Repeat("x", 201) + `", "bad\u0000query", "ok"]}`, []string{"ok"}, false},
		{"prose", "Here are the queries: tram network", nil, true},
		{"the wrong shape", `{"queries":"tram network"}`, nil, true},
		{"nothing", "", nil, true},
	} {
		got, err := parseRewrites(tc.reply, question)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func result(id int64) Result { return Result{Source: db.Source{ChunkID: id}, Relevant: true} }

func ids(rs []Result) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.ChunkID)
	}
	return out
}

func TestFusingQueriesKeepsTheQuestionsOrderUnlessTheRewritesAgree(t *testing.T) {
	list := func(ids ...int64) []Result {
		var out []Result
		for _, id := range ids {
			out = append(out, result(id))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		lists [][]Result
		limit int
		want  []int64
	}{
		{"an echo changes no order", [][]Result{list(1, 2, 3), list(1, 2, 3)}, -1, []int64{1, 2, 3}},
		{"on a tie the question wins", [][]Result{list(1, 2), list(3, 4)}, -1, []int64{1, 3, 2, 4}},
		{"what only a rewrite finds enters the top k", [][]Result{list(1, 2, 3, 4), list(9)}, 3, []int64{1, 9, 2}},
		{"rewrites that agree lift a chunk", [][]Result{list(1, 2, 3), list(3, 7), list(3, 8)}, -1, []int64{3, 1, 2, 7, 8}},
	} {
		got := fuseQueries(tc.lists, tc.limit)
		if !slices.Equal(ids(got), tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, ids(got), tc.want)
		}
		for i, r := range got {
			if r.N != i+1 || r.Fused <= 0 {
				t.Errorf("%s: result %d numbered %d with score %v", tc.name, i, r.N, r.Fused)
			}
		}
	}
}
