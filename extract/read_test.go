package extract

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

func assertBlocks(t *testing.T, got, want []Block) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("blocks:\n got %s\nwant %s", dumpBlocks(got), dumpBlocks(want))
	}
}

func dumpBlocks(bs []Block) string {
	var b strings.Builder
	for _, x := range bs {
		fmt.Fprintf(&b, "\n  {%q headings=%q page=%d table=%v}", x.Text, x.Headings, x.Page, x.Table)
	}
	return b.String()
}

// assertReadError checks that err is a *ReadError whose message contains
// want and reads as a sentence for a user, not a Go internal.
func assertReadError(t *testing.T, err error, want string, tooLarge bool) {
	t.Helper()
	var re *ReadError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v (%T), want a *ReadError", err, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, want) {
		t.Errorf("message %q does not say %q", msg, want)
	}
	for _, internal := range []string{"panic", "runtime", ".go", "goroutine", "/tmp", "0x", "%!"} {
		if strings.Contains(msg, internal) {
			t.Errorf("message %q shows an internal (%q)", msg, internal)
		}
	}
	if errors.Is(err, ErrTooLarge) != tooLarge {
		t.Errorf("errors.Is(err, ErrTooLarge) = %v, want %v", !tooLarge, tooLarge)
	}
}

func read(t *testing.T, format string, data []byte) []Block {
	t.Helper()
	got, err := ReadInProcess(context.Background(), format, data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func utf16Bytes(s string, bigEndian, bom bool) []byte {
	var out []byte
	if bom {
		s = "\ufeff" + s
	}
	for _, u := range utf16.Encode([]rune(s)) {
		if bigEndian {
			out = append(out, byte(u>>8), byte(u))
		} else {
			out = append(out, byte(u), byte(u>>8))
		}
	}
	return out
}

func TestReadTextSplitsParagraphsAndDecodesLegacyEncodings(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want []Block
	}{
		{"paragraphs are separated by blank lines", []byte("First line\nstill first.\n\n  \nSecond.\r\n\r\nThird."),
			[]Block{{Text: "First line\nstill first."}, {Text: "Second."}, {Text: "Third."}}},
		{"Latin-1 text is decoded", []byte("caf\xe9 cr\xe8me \x80"), []Block{{Text: "café crème €"}}},
		{"UTF-8 with a broken byte keeps its letters", []byte("naïve résumé \xff ok"), []Block{{Text: "naïve résumé  ok"}}},
		{"UTF-16 little-endian with a BOM is decoded", utf16Bytes("Grüße\n\nzwei", false, true), []Block{{Text: "Grüße"}, {Text: "zwei"}}},
		{"UTF-16 big-endian with a BOM is decoded", utf16Bytes("日本語", true, true), []Block{{Text: "日本語"}}},
		{"UTF-16 without a BOM is recognized", utf16Bytes("plain words here", false, false), []Block{{Text: "plain words here"}}},
		{"NULs and control characters are dropped", []byte("a\x00b\x01c\x1bd"), []Block{{Text: "abcd"}}},
		{"a UTF-8 BOM is dropped", []byte("\xef\xbb\xbfhello"), []Block{{Text: "hello"}}},
		{"blank text gives no block", []byte(" \n\n\t\n"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertBlocks(t, read(t, FormatText, tt.data), tt.want) })
	}
}

func TestReadMarkdownKeepsTheHeadingPathOfEveryBlock(t *testing.T) {
	tests := []struct {
		name, src string
		want      []Block
	}{
		{"headings make the path of the text below them",
			"# Guide\n\nIntro.\n\n## Install\n\nRun it.\n\n### Linux\n\nApt.\n\n## Use\n\nClick.\n\n# Other\n\nEnd.",
			[]Block{
				{Text: "Intro.", Headings: []string{"Guide"}},
				{Text: "Run it.", Headings: []string{"Guide", "Install"}},
				{Text: "Apt.", Headings: []string{"Guide", "Install", "Linux"}},
				{Text: "Click.", Headings: []string{"Guide", "Use"}},
				{Text: "End.", Headings: []string{"Other"}},
			}},
		{"a setext heading and inline markup give plain text",
			"Title *with* `code`\n===\n\nSome **bold** [link](http://x) and &amp; <b>raw</b> ![alt](i.png).\nnext line",
			[]Block{{Text: "Some bold link and & raw alt. next line", Headings: []string{"Title with code"}}}},
		{"a GFM table is a table block, header first",
			"# T\n\n| Name | Age |\n|------|----:|\n| Ann  | 30  |\n| Bob  | 4 |\n",
			[]Block{{Text: "Name | Age\nAnn | 30\nBob | 4", Headings: []string{"T"}, Table: true}}},
		{"a list is one block with its markers",
			"- one\n- two\n  - nested\n3. three\n4. four\n",
			[]Block{{Text: "- one\n- two\n  - nested"}, {Text: "3. three\n4. four"}}},
		{"a code block keeps its lines", "```go\nfunc main() {\n\tx := 1\n}\n```\n",
			[]Block{{Text: "func main() {\n\tx := 1\n}"}}},
		{"quotes are read and front matter is dropped", "---\ntitle: x\n---\n> quoted\n> text\n",
			[]Block{{Text: "quoted text"}}},
		{"an HTML block gives its text without scripts", "<div>\n<p>kept</p><script>lost()</script>\n</div>\n",
			[]Block{{Text: "kept"}}},
		{"task lists show their boxes", "- [x] done\n- [ ] todo\n", []Block{{Text: "- [x] done\n- [ ] todo"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertBlocks(t, read(t, FormatMarkdown, []byte(tt.src)), tt.want) })
	}
}

func TestReadMarkdownWithDeepNestingIsFast(t *testing.T) {
	for name, src := range map[string]string{
		"quotes": strings.Repeat(">", 200_000) + " deep\n",
		"lists":  strings.Repeat("- ", 100_000) + "deep\n",
		"mixed":  strings.Repeat("> 1. ", 50_000) + "deep\n",
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			got := read(t, FormatMarkdown, []byte(src))
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v", d)
			}
			if len(got) != 1 || !strings.Contains(got[0].Text, "deep") {
				t.Errorf("got %s", dumpBlocks(got))
			}
		})
	}
}

func TestReadMarkdownWithUnclosedLinksIsAboutAsFastAsNormalText(t *testing.T) {
	// goldmark alone is quadratic on this: 20 s for 300 KB (minutes for
	// 1 MB) where normal Markdown of the same size takes 70 ms. Timing
	// against a normal document keeps the test meaningful under -race.
	src := strings.Repeat("[a](", 75_000)
	normal := strings.Repeat("Some [link](http://x) and *words*.\n\n", len(src)/36)
	start := time.Now()
	read(t, FormatMarkdown, []byte(normal))
	base := time.Since(start)
	start = time.Now()
	read(t, FormatMarkdown, []byte(src))
	if d := time.Since(start); d > 40*base+200*time.Millisecond {
		t.Errorf("took %v, normal Markdown of the same size %v", d, base)
	}
}

func TestReadMarkdownInPartsKeepsTablesCodeAndHeadings(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Top\n\n| id | name |\n|---|---|\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "| %d | name %d |\n", i, i)
	}
	b.WriteString("\n## Code\n\n```\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "line %d\n\n", i)
	}
	b.WriteString("```\n\nAfter code.\n\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "Paragraph %d with some words.\n\n", i)
	}
	src := b.String()
	if len(mdParts([]byte(src))) < 5 {
		t.Fatal("the document is not long enough to be parsed in parts")
	}
	rows, code, paras := 0, 0, 0
	for _, bl := range read(t, FormatMarkdown, []byte(src)) {
		switch {
		case bl.Table:
			lines := strings.Split(bl.Text, "\n")
			if lines[0] != "id | name" || !slices.Equal(bl.Headings, []string{"Top"}) {
				t.Fatalf("table part starts with %q under %q", lines[0], bl.Headings)
			}
			rows += len(lines) - 1
		case strings.HasPrefix(bl.Text, "line "):
			if strings.Contains(bl.Text, "```") || !slices.Equal(bl.Headings, []string{"Top", "Code"}) {
				t.Fatalf("code part %q under %q", bl.Text[:20], bl.Headings)
			}
			code += strings.Count(bl.Text, "line ")
		case strings.HasPrefix(bl.Text, "Paragraph ") || bl.Text == "After code.":
			if !slices.Equal(bl.Headings, []string{"Top", "Code"}) {
				t.Fatalf("%q under %q", bl.Text, bl.Headings)
			}
			paras++
		default:
			t.Fatalf("unexpected block %q", bl.Text)
		}
	}
	if rows != 3000 || code != 2000 || paras != 2001 {
		t.Errorf("%d table rows, %d code lines, %d paragraphs; want 3000, 2000, 2001", rows, code, paras)
	}
}

func TestReadHTMLKeepsHeadingsAndSkipsScriptsStylesAndNavigation(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want []Block
	}{
		{"headings make the path and scripts, styles and navigation are skipped",
			[]byte(`<!doctype html><html><head><title>T</title><style>p{}</style><script>var x = "<p>no</p>";</script></head>
<body><nav><a href="/">Home</a><nav>inner</nav>still nav</nav>
<h1>Guide</h1><p>Intro &amp; more&nbsp;text.</p>
<h2>Part <em>one</em></h2><p>First
   paragraph.</p><p>Second<br>line.</p><noscript>js off</noscript><template><p>tpl</p></template>
<h1>Next</h1><div>Plain <span>div</span> text</div></body></html>`),
			[]Block{
				{Text: "Intro & more text.", Headings: []string{"Guide"}},
				{Text: "First paragraph.", Headings: []string{"Guide", "Part one"}},
				{Text: "Second\nline.", Headings: []string{"Guide", "Part one"}},
				{Text: "Plain div text", Headings: []string{"Next"}},
			}},
		{"a table is a table block with its caption as a paragraph",
			[]byte(`<h2>Prices</h2><table><caption>2024</caption><thead><tr><th>Item<th>Cost</thead>
<tbody><tr><td>Tea</td><td>3 <b>€</b></td></tr><tr><td>Cake<td><table><tr><td>inner</td></tr></table></tbody></table><p>After.</p>`),
			[]Block{
				{Text: "2024", Headings: []string{"Prices"}},
				{Text: "Item | Cost\nTea | 3 €\nCake | inner", Headings: []string{"Prices"}, Table: true},
				{Text: "After.", Headings: []string{"Prices"}},
			}},
		{"block elements inside a heading stay in it", []byte("<h2><a><div>Deep</div> title</a></h2><p>Body</p>"),
			[]Block{{Text: "Body", Headings: []string{"Deep title"}}}},
		{"a heading never closed turns into text", []byte("<h1>Title<p>" + strings.Repeat("long text ", 200)),
			[]Block{{Text: "Title " + strings.TrimSpace(strings.Repeat("long text ", 200))}}},
		{"pre keeps its layout", []byte("<p>x</p><pre>a  b\n  c</pre>"), []Block{{Text: "x"}, {Text: "a  b\n  c"}}},
		{"unclosed elements do no harm", []byte("<p>one<p>two<li>three<table><tr><td>t"),
			[]Block{{Text: "one"}, {Text: "two"}, {Text: "three"}, {Text: "t", Table: true}}},
		{"a declared Windows-1252 charset is honoured",
			[]byte("<meta charset=\"windows-1252\"><p>caf\xe9 \x93quoted\x94</p>"), []Block{{Text: "café “quoted”"}}},
		{"UTF-8 with a broken byte and no charset stays UTF-8", []byte("<p>naïve résumé \xff</p>"), []Block{{Text: "naïve résumé"}}},
		{"invalid UTF-8 without a charset is repaired", []byte("<p>ok \xff\xfe done</p>"), []Block{{Text: "ok \u00ff\u00fe done"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertBlocks(t, read(t, FormatHTML, tt.data), tt.want) })
	}
}

func TestReadHTMLWithDeepNestingIsFast(t *testing.T) {
	src := strings.Repeat("<div><span><b>", 200_000) + "deep" + strings.Repeat("</b></span></div>", 200_000)
	start := time.Now()
	got := read(t, FormatHTML, []byte(src))
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	assertBlocks(t, got, []Block{{Text: "deep"}})
}

func TestReadHTMLOverMaxTextIsRefused(t *testing.T) {
	src := "<html><body>" + strings.Repeat("<p>twelve chars</p>", 1000) + "</body></html>"
	_, err := ReadInProcess(context.Background(), FormatHTML, []byte(src), Limits{MaxText: 5000})
	assertReadError(t, err, "more than 5,000 characters", true)
}

func TestReadCSVReadsRowsAsATableBlock(t *testing.T) {
	tests := []struct {
		name, src string
		want      []Block
	}{
		{"rows are a table block under the header", "name,age\nAnn,30\n\"Bob, Jr.\",\"4\nyears\"\n",
			[]Block{{Text: "name | age\nAnn | 30\nBob, Jr. | 4 years", Table: true}}},
		{"a semicolon delimiter is recognized", "a;b;c\n1;2;3\n", []Block{{Text: "a | b | c\n1 | 2 | 3", Table: true}}},
		{"ragged rows and stray quotes are read", "a,b\n1\n2,x\"y,z\n", []Block{{Text: "a | b\n1\n2 | x\"y | z", Table: true}}},
		{"a header alone is kept", "only,header\n", []Block{{Text: "only | header", Table: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertBlocks(t, read(t, FormatCSV, []byte(tt.src)), tt.want) })
	}
}

func TestReadCSVRepeatsTheHeaderInEveryBlock(t *testing.T) {
	var b strings.Builder
	b.WriteString("id,description\n")
	for i := range 500 {
		fmt.Fprintf(&b, "%d,row number %d of a long file\n", i, i)
	}
	got := read(t, FormatCSV, []byte(b.String()))
	if len(got) < 2 {
		t.Fatalf("got %d blocks, want several", len(got))
	}
	rows := 0
	for _, bl := range got {
		lines := strings.Split(bl.Text, "\n")
		if lines[0] != "id | description" || !bl.Table {
			t.Errorf("block starts with %q (table %v)", lines[0], bl.Table)
		}
		if n := len([]rune(bl.Text)); n > csvBlockRunes {
			t.Errorf("block of %d runes", n)
		}
		rows += len(lines) - 1
	}
	if rows != 500 {
		t.Errorf("%d rows in all, want 500", rows)
	}
}

func TestReadRefusesAnUnknownFormat(t *testing.T) {
	if _, err := ReadInProcess(context.Background(), "xlsx", []byte("x"), Limits{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
}

func TestEveryReaderStopsWhenItsContextIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, format := range []string{FormatText, FormatMarkdown, FormatHTML, FormatCSV, FormatDOCX, FormatPDF} {
		if _, err := ReadInProcess(ctx, format, []byte("a,b\n1,2"), Limits{}); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", format, err)
		}
	}
}

func TestReadOverMaxTextIsRefused(t *testing.T) {
	for _, format := range []string{FormatText, FormatMarkdown, FormatCSV} {
		t.Run(format, func(t *testing.T) {
			_, err := ReadInProcess(context.Background(), format, []byte(strings.Repeat("word, ", 100)), Limits{MaxText: 99})
			assertReadError(t, err, "more than 99 characters", true)
		})
	}
}
