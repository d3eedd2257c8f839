package rag

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// prose is n sentences in paragraphs of five, each sentence unique.
func prose(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "Sentence number %d talks about topic %d in some detail. ", i, i*7)
		if i%5 == 4 {
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

// checkChunks asserts what holds for every split: consecutive positions,
// no blank chunk, and text within size (tables within tableMax).
func checkChunks(t *testing.T, chunks []Chunk, size, tableMax int) {
	t.Helper()
	for i, c := range chunks {
		if c.Position != i {
			t.Errorf("chunk %d has position %d", i, c.Position)
		}
		if strings.TrimSpace(c.Text) == "" || c.Text != strings.TrimSpace(c.Text) {
			t.Errorf("chunk %d is blank or untrimmed: %q", i, c.Text)
		}
		limit := size
		if strings.Contains(c.Text, " | ") {
			limit = tableMax
		}
		if n := utf8.RuneCountInString(c.Text); n > limit {
			t.Errorf("chunk %d has %d runes, over %d", i, n, limit)
		}
	}
}

func TestChunksRespectSizeAndKeepEverySentence(t *testing.T) {
	text := prose(300)
	for _, opt := range []ChunkOptions{{}, {Size: 400, Overlap: 50}, {Size: 120, Overlap: -1}, {Size: 1000, Overlap: 900}} {
		t.Run(fmt.Sprintf("%+v", opt), func(t *testing.T) {
			chunks := Split([]Block{{Text: text}}, opt)
			o := opt.withDefaults()
			checkChunks(t, chunks, o.Size, o.TableMax)
			if len(chunks) < 2 {
				t.Fatalf("%d chunks", len(chunks))
			}
			all := ""
			for _, c := range chunks {
				all += c.Text + "\n"
			}
			for i := range 300 {
				if s := fmt.Sprintf("Sentence number %d talks", i); !strings.Contains(all, s) {
					t.Fatalf("%q is lost", s)
				}
			}
		})
	}
}

func TestChunksOverlapOnlyWithinASection(t *testing.T) {
	a, b := []string{"A"}, []string{"B"}
	chunks := Split([]Block{{Text: prose(40), Headings: a}, {Text: prose(40), Headings: b}}, ChunkOptions{Size: 500, Overlap: 100})
	checkChunks(t, chunks, 500, 3000)
	overlaps := 0
	for i := 1; i < len(chunks); i++ {
		prev, cur := chunks[i-1], chunks[i]
		shared := sharedOverlap(prev.Text, cur.Text)
		if !slices.Equal(prev.Headings, cur.Headings) {
			if shared > 0 {
				t.Errorf("chunk %d repeats %d runes of another section", i, shared)
			}
			continue
		}
		if shared < 20 || shared > 100 {
			t.Errorf("chunk %d repeats %d runes of the previous one, want 20..100:\n%q\n%q", i, shared, prev.Text, cur.Text)
		}
		overlaps++
	}
	if overlaps < 4 {
		t.Errorf("only %d overlaps", overlaps)
	}
}

// sharedOverlap is the length in runes of the longest end of prev that
// starts cur (at least two words long to count).
func sharedOverlap(prev, cur string) int {
	for i := range prev {
		if tail := prev[i:]; strings.HasPrefix(cur, tail) && strings.Contains(tail, " ") {
			return utf8.RuneCountInString(tail)
		}
	}
	return 0
}

func TestChunksWithoutOverlapRepeatNothing(t *testing.T) {
	chunks := Split([]Block{{Text: prose(100)}}, ChunkOptions{Size: 300, Overlap: -1})
	for i := 1; i < len(chunks); i++ {
		if n := sharedOverlap(chunks[i-1].Text, chunks[i].Text); n > 0 {
			t.Errorf("chunk %d repeats %d runes", i, n)
		}
	}
}

func TestChunksNeverMixSectionsOrPages(t *testing.T) {
	blocks := []Block{
		{Text: "Intro.", Headings: []string{"A"}},
		{Text: "More intro.", Headings: []string{"A"}},
		{Text: "Detail.", Headings: []string{"A", "B"}},
		{Text: "Back.", Headings: []string{"A"}},
		{Text: "Page one.", Page: 1},
		{Text: "Page two.", Page: 2},
		{Text: "Still two.", Page: 2},
	}
	want := []Chunk{
		{0, "Intro.\n\nMore intro.", []string{"A"}, 0},
		{1, "Detail.", []string{"A", "B"}, 0},
		{2, "Back.", []string{"A"}, 0},
		{3, "Page one.", nil, 1},
		{4, "Page two.\n\nStill two.", nil, 2},
	}
	got := Split(blocks, ChunkOptions{})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

func TestChunksMergeSmallBlocksUpToSize(t *testing.T) {
	var blocks []Block
	for i := range 30 {
		blocks = append(blocks, Block{Text: fmt.Sprintf("Short paragraph %02d here.", i)}) // 25 runes
	}
	chunks := Split(blocks, ChunkOptions{Size: 200, Overlap: -1})
	checkChunks(t, chunks, 200, 3000)
	if len(chunks) != 5 { // 30 × 27 runes with separators, 7 per chunk
		t.Errorf("%d chunks, want 5: %v", len(chunks), chunks)
	}
}

func TestChunksKeepSmallTablesWholeAndApart(t *testing.T) {
	table := "Name | Age\nAnn | 30\nBob | 4"
	chunks := Split([]Block{
		{Text: "Before.", Headings: []string{"H"}},
		{Text: table, Headings: []string{"H"}, Table: true},
		{Text: "After.", Headings: []string{"H"}},
	}, ChunkOptions{})
	var texts []string
	for _, c := range chunks {
		texts = append(texts, c.Text)
	}
	if want := []string{"Before.", table, "After."}; !slices.Equal(texts, want) {
		t.Errorf("got %q, want %q", texts, want)
	}

	// Bigger than Size but within TableMax: still one chunk.
	var big strings.Builder
	big.WriteString("key | value")
	for i := range 100 {
		fmt.Fprintf(&big, "\nrow %03d | value %03d", i, i)
	}
	chunks = Split([]Block{{Text: big.String(), Table: true}}, ChunkOptions{Size: 500, TableMax: 3000})
	if len(chunks) != 1 || chunks[0].Text != big.String() {
		t.Errorf("a %d-rune table became %d chunks", utf8.RuneCountInString(big.String()), len(chunks))
	}
}

func TestChunksOfBigTablesAreCutByRowsRepeatingTheHeader(t *testing.T) {
	var b strings.Builder
	b.WriteString("id | name | note")
	for i := range 200 {
		fmt.Fprintf(&b, "\n%d | item %d | a note about it", i, i)
	}
	b.WriteString("\n999 | huge | " + strings.Repeat("word ", 200))
	chunks := Split([]Block{{Text: b.String(), Table: true, Page: 3}}, ChunkOptions{TableMax: 600})
	checkChunks(t, chunks, 600, 600)
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	seen := map[string]int{}
	for _, c := range chunks {
		lines := strings.Split(c.Text, "\n")
		if lines[0] != "id | name | note" || c.Page != 3 {
			t.Errorf("chunk %d starts with %q on page %d", c.Position, lines[0], c.Page)
		}
		for _, l := range lines[1:] {
			seen[l]++
		}
	}
	for i := range 200 {
		if row := fmt.Sprintf("%d | item %d | a note about it", i, i); seen[row] != 1 {
			t.Errorf("row %d appears %d times", i, seen[row])
		}
	}
}

func TestChunksCutTextWithoutSpaces(t *testing.T) {
	cjk := strings.Repeat("漢字仮名交じり文", 500) // 4000 runes, no spaces or stops
	chunks := Split([]Block{{Text: cjk}}, ChunkOptions{Size: 300, Overlap: 30})
	checkChunks(t, chunks, 300, 3000)
	if len(chunks) < 14 {
		t.Errorf("%d chunks for 4000 runes", len(chunks))
	}
	withStops := strings.Repeat("これは文です。", 300)
	for _, c := range Split([]Block{{Text: withStops}}, ChunkOptions{Size: 100, Overlap: -1}) {
		if !strings.HasSuffix(c.Text, "。") {
			t.Errorf("chunk %d does not end at a full stop: %q", c.Position, c.Text)
		}
	}
}

func TestChunksAreNeverEmpty(t *testing.T) {
	for name, blocks := range map[string][]Block{
		"no blocks":         nil,
		"blank blocks":      {{Text: ""}, {Text: " \n\t "}, {Text: "\n\n", Table: true}},
		"blank among text":  {{Text: "a"}, {Text: "  "}, {Text: "b"}},
		"only separators":   {{Text: strings.Repeat("\n\n", 1000)}},
		"text after blanks": {{Text: "   \n\nword"}},
	} {
		t.Run(name, func(t *testing.T) {
			chunks := Split(blocks, ChunkOptions{Size: 10})
			checkChunks(t, chunks, 10, 3000)
		})
	}
}
