package rag_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"weft/db"
	"weft/internal/fakeollama"
	"weft/rag"
)

// storeTexts adds a ready document of these chunk texts, titled as a
// document of that name would be, to a knowledge base.
func storeTexts(t *testing.T, e *env, kb db.KnowledgeBase, name string, texts []string) db.Document {
	t.Helper()
	ctx := context.Background()
	doc, err := e.store.AddDocument(ctx, e.user.ID, kb.ID, db.NewDocument{Name: name, SHA256: name, Data: []byte("x")},
		func(pgx.Tx, db.Document) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	title := rag.DocTitle(name)
	var cs []db.NewChunk
	for i, text := range texts {
		cs = append(cs, db.NewChunk{Position: i, Text: text, Headings: []string{}, Title: title,
			Idents: rag.Identifiers(title + " " + text), Embedding: fakeollama.Vector(rag.EmbedText(title, nil, text), kb.Dims)})
	}
	if err := e.store.StoreChunks(ctx, doc, kb.Generation, kb.Dims, cs, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.store.FinishIngest(ctx, doc.ID, ""); err != nil {
		t.Fatal(err)
	}
	return doc
}

// textTop returns the texts of the full-text side's best chunks for q.
func textTop(t *testing.T, e *env, kb db.KnowledgeBase, q string, n int) []db.TextHit {
	t.Helper()
	kb, err := e.store.KB(context.Background(), e.user.ID, kb.ID)
	if err != nil {
		t.Fatal(err)
	}
	hits, err := e.store.TextSearch(context.Background(), e.user.ID, kb, db.TextQuery{Text: q, Idents: rag.Identifiers(q)}, n)
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func TestAWordEveryChunkHoldsStillCountsAndTheRareWordDecides(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Numbers", "embedder-small")
	var texts []string
	for i := range 600 {
		texts = append(texts, fmt.Sprintf("chunk number %d of the ledger", i))
	}
	doc := storeTexts(t, e, kb, "ledger.txt", texts)
	hits := textTop(t, e, kb, "which chunk has number 77?", 5)
	if len(hits) == 0 || !strings.Contains(hits[0].Text, "number 77 ") {
		t.Fatalf("the first hit is not chunk 77: %+v", hits)
	}
	if hits[0].Why["77"] <= hits[0].Why["chunk"] {
		t.Errorf("the rare word weighs no more than the common one: %v", hits[0].Why)
	}
	// Only words every chunk holds: still an answer (the old rule dropped
	// such words and searched nothing).
	if hits = textTop(t, e, kb, "chunk number", 5); len(hits) != 5 {
		t.Errorf("only common words: %d hits, want 5", len(hits))
	}
	// Deleting the document takes its words out of the counts.
	if err := e.store.DeleteDocument(context.Background(), e.user.ID, doc.ID); err != nil {
		t.Fatal(err)
	}
	var left int
	e.store.Pool.QueryRow(context.Background(), "SELECT coalesce(sum(chunks), 0) FROM kb_lexemes WHERE kb_id = $1", kb.ID).Scan(&left)
	if kb, _ = e.store.KB(context.Background(), e.user.ID, kb.ID); kb.Chunks != 0 || left != 0 {
		t.Errorf("after deleting the document: %d chunks, %d word counts left", kb.Chunks, left)
	}
}

func TestADocumentWhoseTopicWordIsInEveryChunkIsStillFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Instruments", "embedder-small")
	// The zither handbook is most of the knowledge base and says "zither"
	// in every chunk; other documents never do.
	var zither, others []string
	for i := range 400 {
		zither = append(zither, fmt.Sprintf("The zither, part %d: care of the soundboard number %d.", i, i))
	}
	zither[250] = "To tune a zither, turn each pin with the tuning key until the string matches the pitch."
	for i := range 200 {
		others = append(others, fmt.Sprintf("Tuning forks and pitch pipes, note %d: how a string sounds.", i))
	}
	storeTexts(t, e, kb, "zither.md", zither)
	storeTexts(t, e, kb, "pitch.md", others)
	hits := textTop(t, e, kb, "how do I tune my zither?", 3)
	if len(hits) == 0 || hits[0].Document != "zither.md" || !strings.Contains(hits[0].Text, "To tune a zither") {
		t.Fatalf("the first hit is not the zither tuning passage: %+v", hits)
	}
	res, err := e.svc.Search(context.Background(), rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{mustKB(t, e, kb)}, Text: "zither"})
	if err != nil || len(res) == 0 || res[0].Document != "zither.md" {
		t.Fatalf("hybrid search for the topic word alone: %v, %+v", err, res)
	}
}

func mustKB(t *testing.T, e *env, kb db.KnowledgeBase) db.KnowledgeBase {
	t.Helper()
	kb, err := e.store.KB(context.Background(), e.user.ID, kb.ID)
	if err != nil {
		t.Fatal(err)
	}
	return kb
}

func TestTheTextSideStemsWordsByTheKnowledgeBasesLanguage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Setup", "embedder-small")
	storeTexts(t, e, kb, "setup.md", []string{
		"Running the installers creates the directories you need.",
		"Nothing here is about that at all.",
	})
	hits := textTop(t, e, kb, "what does the installer create when it runs?", 2)
	if len(hits) == 0 || !strings.Contains(hits[0].Text, "installers creates") {
		t.Fatalf("english stemming: %+v", hits)
	}
	for _, w := range []string{"instal", "creat", "run"} {
		if hits[0].Why[w] == 0 {
			t.Errorf("the stem %q did not count: %v", w, hits[0].Why)
		}
	}
	// The same chunks in a knowledge base without stemming: "installer"
	// does not match "installers".
	plain := e.kb(e.user, e.ws, "Setup (simple)", "embedder-small")
	mustExec(t, e.store, "UPDATE knowledge_bases SET language = 'simple' WHERE id = $1", plain.ID)
	storeTexts(t, e, mustKB(t, e, plain), "setup2.md", []string{"Running the installers creates the directories you need."})
	if hits := textTop(t, e, plain, "installer", 2); len(hits) != 0 {
		t.Errorf("without stemming %q matched: %+v", "installer", hits)
	}
}

func TestIdentifiersAreFoundWholeAndByTheirParts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Config", "embedder-small")
	storeTexts(t, e, kb, "server.md", []string{
		"Raise max_connections when clients are refused.",
		"The max of the connections table is shown elsewhere.",
		"Build paths with os.path.join(a, b) rather than by hand.",
		"The join of two tables in a database.",
	})
	if hits := textTop(t, e, kb, "max_connections", 2); len(hits) == 0 || !strings.Contains(hits[0].Text, "max_connections") {
		t.Errorf("max_connections: %+v", hits)
	} else if hits[0].Why["max_connections"] == 0 {
		t.Errorf("the whole identifier did not count: %v", hits[0].Why)
	}
	if hits := textTop(t, e, kb, "os.path.join", 2); len(hits) == 0 || !strings.Contains(hits[0].Text, "os.path.join") {
		t.Errorf("os.path.join: %+v", hits)
	}
	found := false
	for _, h := range textTop(t, e, kb, "how do I join paths", 4) {
		found = found || strings.Contains(h.Text, "os.path.join")
	}
	if !found {
		t.Error("the part join of os.path.join was not found")
	}
}

func TestIdentifiersKeepsDottedAndUnderscoredNamesWhole(t *testing.T) {
	got := rag.Identifiers("Use os.path.join() and max_connections, not e.g. 3.14 or __init__; OS.Path.Join again.")
	// __init__ is "init" to the parser as to the question: nothing to keep.
	want := []string{"os.path.join", "max_connections", "e.g"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Identifiers = %q, want %q", got, want)
	}
}

func TestACommonWordScoresTheCandidatesButDoesNotBringInItsChunks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Python", "embedder-small")
	// More chunks hold "python" than a text query ranks (textPostings).
	texts := make([]string, 3100)
	for i := range texts {
		texts[i] = fmt.Sprintf("Python documentation, page %d.", i)
	}
	texts[1234] = "Python documentation: the zygote module."
	storeTexts(t, e, kb, "python.md", texts)
	hits := textTop(t, e, kb, "python zygote", 5)
	if len(hits) != 1 || !strings.Contains(hits[0].Text, "zygote") {
		t.Fatalf("want only the zygote chunk: %+v", hits)
	}
	if _, ok := hits[0].Why["python"]; !ok {
		t.Errorf("the common word did not score the candidate: %v", hits[0].Why)
	}
}

func TestAChunkWhereTheQuestionsWordsSitTogetherOutranksOneWhereTheyAreScattered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Garden", "embedder-small")
	filler := make([]string, 90)
	for i := range filler {
		filler[i] = fmt.Sprintf("w%c%c", 'a'+i/26, 'a'+i%26)
	}
	words := func(parts ...[]string) string {
		var all []string
		for _, p := range parts {
			all = append(all, p...)
		}
		return strings.Join(all, " ")
	}
	q := []string{"nettle", "tea", "compost"}
	// The same words, as often, in chunks of the same length: the text
	// side and the (bag of words) vector side score both alike. The
	// scattered one is stored first, so it would win the tie.
	scattered := words(q[:1], filler[:40], q[1:2], filler[40:80], q[2:], filler[80:])
	together := words(q, filler)
	storeTexts(t, e, kb, "garden.txt", []string{scattered, together})
	storeTexts(t, e, kb, "kitchen.txt", []string{"tea and cake", "a nettle soup", "bread"})
	for _, mode := range []rag.Mode{rag.TextOnly, rag.Hybrid} {
		res, err := e.svc.Search(context.Background(), rag.Query{User: e.user.ID, KBs: []db.KnowledgeBase{kb},
			Text: "nettle tea compost", Mode: mode, TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		if len(res) < 2 || res[0].Text != together || res[1].Text != scattered {
			t.Fatalf("%s: the chunk with the words together is not first, then the scattered one: %+v", mode, res)
		}
		if res[0].PassagePart <= 0 || res[0].PassageScore <= res[1].PassageScore || res[0].TextScore != res[1].TextScore {
			t.Errorf("%s: passage parts %.3f (score %.3f vs %.3f), text scores %.3f vs %.3f",
				mode, res[0].PassagePart, res[0].PassageScore, res[1].PassageScore, res[0].TextScore, res[1].TextScore)
		}
	}
}

func TestWordPositionsAreReadOnlyFromTheUsersOwnChunks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, rag.Config{})
	kb := e.kb(e.user, e.ws, "Garden", "embedder-small")
	storeTexts(t, e, kb, "garden.txt", []string{"nettle tea for the compost heap"})
	other, _ := e.newUser("other@example.com")
	ctx := context.Background()
	hits := textTop(t, e, kb, "nettle compost", 1)
	if len(hits) != 1 {
		t.Fatalf("hits %+v", hits)
	}
	id := hits[0].ChunkID
	q := db.TextQuery{Text: "nettle compost"}
	mine, err := e.store.TermPositions(ctx, e.user.ID, kb, q, []int64{id})
	if err != nil || len(mine) != 2 || mine[0].Word != "compost" || len(mine[0].Positions) != 1 || mine[0].Positions[0] <= mine[0].HeadEnd {
		t.Fatalf("the owner's positions: %+v (%v)", mine, err)
	}
	theirs, err := e.store.TermPositions(ctx, other.ID, kb, q, []int64{id})
	if err != nil || len(theirs) != 0 {
		t.Errorf("another user read the positions: %+v (%v)", theirs, err)
	}
}
