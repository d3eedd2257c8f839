package rag_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgvector/pgvector-go"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/internal/testwait"
	"weft/rag"
)

func result(id, doc int64, pos int, text string, headings ...string) rag.Result {
	return rag.Result{Source: db.Source{ChunkID: id, DocumentID: doc, Document: "d", Position: pos, Text: text, Headings: headings}, Relevant: true}
}

func TestSourcesJoinTheRankedChunksThatContinueASectionAndFitTheBudget(t *testing.T) {
	t.Parallel()
	res := []rag.Result{
		result(11, 1, 4, "The first overlap of twenty. Four. The second overlap is here.", "Setup"),
		result(20, 2, 0, strings.Repeat("x", 40)),
		result(12, 1, 5, "The second overlap is here. Five.", "Setup"),
		result(13, 1, 6, "Six, another section.", "Other"),
		result(10, 1, 3, "Three. The first overlap of twenty.", "Setup"),
		result(30, 3, 0, strings.Repeat("y", 500)),
		result(40, 4, 0, "short"),
	}
	got := rag.Choose(res, 120, 10)
	var ids []int64
	for i, s := range got {
		ids = append(ids, s.ChunkID)
		if s.N != i+1 {
			t.Errorf("source %d numbered %d", i, s.N)
		}
	}
	// Chunks 10, 11 and 12 are one source, the overlaps written once; 13
	// (another heading) is apart and no longer fits; 500 characters do not
	// fit what is left: passed over for the shorter one after them.
	if want := []int64{10, 20, 40}; !equalIDs(ids, want) {
		t.Fatalf("sources %v, want %v", ids, want)
	}
	if want := "Three. The first overlap of twenty. Four. The second overlap is here. Five."; got[0].Text != want {
		t.Errorf("the joined source: %q", got[0].Text)
	}
	if len(got[0].Joined) != 2 || got[0].Joined[0] != 11 || got[0].Joined[1] != 12 {
		t.Errorf("joined %v, want [11 12]", got[0].Joined)
	}
	// The first source goes even when it alone is over the budget, but
	// joins nothing then; most caps the count.
	if got := rag.Choose(res, 10, 2); len(got) != 1 || got[0].ChunkID != 11 || len(got[0].Joined) != 0 {
		t.Errorf("a budget smaller than the first source: %+v", got)
	}
	if got := rag.Choose(res, 1<<20, 2); len(got) != 2 {
		t.Errorf("at most 2: %d sources", len(got))
	}
}

func TestASourceGrowsByItsNeighboursOnlyWithinWhatIsLeftAndNeverEatsText(t *testing.T) {
	t.Parallel()
	a, b5, b6, c := strings.Repeat("a", 1400), strings.Repeat("b", 1400), "| 3 | 4 |"+strings.Repeat(" ", 1391), strings.Repeat("c", 1000)
	got := rag.Choose([]rag.Result{result(1, 1, 0, a), result(5, 2, 5, b5), result(6, 2, 6, b6), result(9, 3, 0, c)}, 3000, 10)
	if len(got) != 2 || got[1].ChunkID != 5 || got[1].Text != b5 {
		t.Fatalf("the second source should be chunk 5 alone (its neighbour does not fit): %+v", got)
	}
	// Neighbours that do not overlap (a table's rows, overlap 0) are two
	// paragraphs, not glued where their edges happen to match.
	got = rag.Choose([]rag.Result{result(1, 1, 0, "| 1 | 2 | 3 | 4 |"), result(2, 1, 1, "| 3 | 4 | A | B |")}, 1000, 10)
	if len(got) != 1 || got[0].Text != "| 1 | 2 | 3 | 4 |\n\n| 3 | 4 | A | B |" {
		t.Errorf("rows joined as %q", got[0].Text)
	}
	// Characters, not bytes: 100 Cyrillic letters are 100 of the budget.
	ru := strings.Repeat("я", 100)
	if got := rag.Choose([]rag.Result{result(1, 1, 0, ru), result(2, 2, 0, ru)}, 200, 10); len(got) != 2 {
		t.Errorf("two 100-letter Cyrillic sources in 200 characters: %d", len(got))
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestEveryChunkCarriesItsDocumentsTitleInItsTextIndexAndItsEmbedding(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Stable", "embedder")
	mustExec(t, e.store, "UPDATE knowledge_bases SET chunk_size = 200, chunk_overlap = 0 WHERE id = $1", kb.ID)
	body := "# Daily care\n\nFeed them hay twice a day and fresh water always.\n\n" + strings.Repeat("Brush the coat gently after the ride. ", 20)
	d := e.wait(e.user, e.add(e.user, kb, "zebra-care.md", body))
	if d.Status != db.DocReady || d.Chunks < 3 {
		t.Fatalf("document %s with %d chunks", d.Status, d.Chunks)
	}
	// "zebra" is only in the name, yet every chunk is found by it.
	hits := textTop(t, e, kb, "zebra", 10)
	if len(hits) != d.Chunks {
		t.Fatalf("the title found %d of %d chunks", len(hits), d.Chunks)
	}
	top := textTop(t, e, kb, "what does a zebra eat, hay?", 1)
	if len(top) == 0 || !strings.Contains(top[0].Text, "Feed them hay") || top[0].Why["zebra"] == 0 {
		t.Errorf("the passage on feeding: %+v", top)
	}
	// Each stored vector is that of the title and heading path, then the
	// text.
	rows, err := e.store.Pool.Query(context.Background(), "SELECT text, headings, embedding FROM kb_chunks WHERE document_id = $1", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var text string
		var headings []string
		var v pgvector.Vector
		if err := rows.Scan(&text, &headings, &v); err != nil {
			t.Fatal(err)
		}
		want := fakeollama.Vector(rag.EmbedText("zebra-care", headings, text), kb.Dims)
		if !slices.Equal(v.Slice(), want) {
			t.Errorf("the chunk %.30q was not embedded with its title first", text)
		}
		n++
	}
	if n != d.Chunks {
		t.Errorf("%d vectors, %d chunks", n, d.Chunks)
	}
	if got := rag.EmbedText("zebra-care", []string{"Daily care"}, "Feed."); got != "zebra-care › Daily care\n\nFeed." {
		t.Errorf("EmbedText = %q", got)
	}
}

func TestChangingTheLanguageIndexesEveryChunkAgainInTheBackground(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	ctx := context.Background()
	kb := e.kb(e.user, e.ws, "Setup", "embedder-small")
	storeTexts(t, e, kb, "setup.md", []string{"Running the installers creates the directories you need."})
	if hits := textTop(t, e, kb, "installer", 2); len(hits) != 1 {
		t.Fatalf("english: %d hits for installer", len(hits))
	}
	if err := e.svc.UpdateSettings(ctx, e.user.ID, mustKB(t, e, kb), rag.Settings{Language: "Klingon"}); err == nil ||
		!strings.Contains(err.Error(), "language must be one of") {
		t.Fatalf("an unknown language: %v", err)
	}
	if err := e.svc.UpdateSettings(ctx, e.user.ID, mustKB(t, e, kb), rag.Settings{Language: "simple"}); err != nil {
		t.Fatal(err)
	}
	var now db.KnowledgeBase
	if !testwait.Until(30*time.Second, func() bool {
		now = mustKB(t, e, kb)
		return now.PendingLanguage == ""
	}) {
		t.Fatalf("still moving to %q", now.PendingLanguage)
	}
	if now.Language != "simple" {
		t.Fatalf("the language is %q", now.Language)
	}
	if hits := textTop(t, e, kb, "installer", 2); len(hits) != 0 {
		t.Errorf("without stemming installer still matched: %+v", hits)
	}
	if hits := textTop(t, e, kb, "installers", 2); len(hits) != 1 {
		t.Errorf("without stemming the word itself: %d hits", len(hits))
	}
	var words int
	e.store.Pool.QueryRow(ctx, "SELECT count(*) FROM kb_lexemes WHERE kb_id = $1 AND word = 'installers'", kb.ID).Scan(&words)
	if words != 1 {
		t.Errorf("the word counts were not made again (%d rows for installers)", words)
	}
}
