package extract

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// blocksText joins the blocks' text the way a search would see it.
func blocksText(bs []Block) string {
	var b strings.Builder
	for _, x := range bs {
		b.WriteString(x.Text)
		b.WriteString("\n")
	}
	return b.String()
}

func assertHas(t *testing.T, text string, kept, dropped []string) {
	t.Helper()
	for _, s := range kept {
		if !strings.Contains(text, s) {
			t.Errorf("the text lost %q", s)
		}
	}
	for _, s := range dropped {
		if strings.Contains(text, s) {
			t.Errorf("the text keeps chrome %q", s)
		}
	}
}

// The pages in testdata/html are real pages of four generators, copied from
// Debian's documentation packages (testdata/html/README.md).
func TestReadHTMLOfRealDocumentationPagesKeepsTheBodyAndLeavesOutTheChrome(t *testing.T) {
	tests := []struct {
		file     string
		heading  string // the heading path of the first block starts with it
		kept     []string
		dropped  []string
		headings []string // somewhere in the heading paths
	}{
		{"sphinx-python-glob.html", "glob — Unix style pathname pattern expansion",
			[]string{
				"The glob module finds all the pathnames matching a specified pattern according to the rules used by the Unix shell",
				"Using the “**” pattern in large directory trees may consume an inordinate amount of time.",
				"glob.escape(pathname)",
			},
			[]string{"Navigation", "Previous topic", "Next topic", "This Page", "Report a Bug", "Show Source", "¶",
				"Generate temporary files and directories", "Unix filename pattern matching", "File and Directory Access",
				"Python Software Foundation", "Table of Contents", "3.11.2 Documentation", "modules |"},
			nil},
		{"docbook-postgresql-partial-indexes.html", "11.8. Partial Indexes",
			[]string{
				"A partial index is an index built over a subset of a table; the subset is defined by a conditional expression",
				"More information about partial indexes can be found in",
			},
			[]string{"Prev", "Home", "Chapter 11. Indexes", "Indexes on Expressions", "Index-Only Scans"},
			nil},
		{"mkdocs-deploying.html", "Deploying your docs",
			[]string{
				"If you host the source code for a project on GitHub, you can easily use GitHub Pages to host the documentation",
				"This file will be automatically used when deploying to GitHub but only on a custom domain.",
			},
			[]string{"Edit on GitHub", "Documentation built with", "Tom Christie", "Keyboard Shortcuts", "Getting Started",
				"Release Notes", "Open this help", "From here you can search these documents"},
			[]string{"GitHub Pages", "Custom Domains"}},
		{"mkdocs-material-literate-nav-reference.html", "Reference",
			[]string{
				"The literate nav file must be a Markdown file, which can contain arbitrary content",
				"Resolution of wildcards is done in a particular order, depth-first",
			},
			[]string{"Skip to content", "Made with", "Material for MkDocs", "Table of contents", "Overview", "Previous"},
			[]string{"Literate nav syntax", "Wildcards"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "html", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got := read(t, FormatHTML, data)
			if len(got) == 0 {
				t.Fatal("no blocks")
			}
			if h := got[0].Headings; len(h) == 0 || h[0] != tt.heading {
				t.Errorf("first block under %q, want it under %q", h, tt.heading)
			}
			assertHas(t, blocksText(got), tt.kept, tt.dropped)
			for _, want := range tt.headings {
				if !slices.ContainsFunc(got, func(b Block) bool { return slices.Contains(b.Headings, want) }) {
					t.Errorf("no block under the heading %q", want)
				}
			}
		})
	}
}

const chromePage = `<!doctype html><html><head><title>Page title</title></head><body>
<a class="skip-link" href="#c">Skip to content</a>
<header><h1>Site name</h1><p>Site tagline</p></header>
<nav><a href="/">Home</a> | <a href="/docs">Docs</a></nav>
<div class="sidebar"><h3>Sidebar heading</h3><p>Sidebar text</p></div>
%s
<aside><p>Related posts</p></aside>
<footer><p>Copyright footer</p></footer>
<script>var x = 1;</script>
</body></html>`

var chromeStrings = []string{"Skip to content", "Site name", "Site tagline", "Home", "Docs", "Sidebar", "Related posts",
	"Copyright footer", "Page title", "var x"}

func TestReadHTMLWithAMainElementReadsOnlyIt(t *testing.T) {
	long := strings.Repeat("Body sentence of the page. ", 30)
	tests := []struct {
		name, body string
		want       []Block
	}{
		{"a <main> is read alone, its own header, aside and footer kept",
			`<p>Before main, outside it.</p><main><article><header><h1>Title</h1></header><p>` + long + `</p>
<aside class="footnote"><p>A footnote.</p></aside><footer><p>Article footer.</p></footer></article></main><p>After main.</p>`,
			[]Block{
				{Text: strings.TrimSpace(long), Headings: []string{"Title"}},
				{Text: "A footnote.", Headings: []string{"Title"}},
				{Text: "Article footer.", Headings: []string{"Title"}},
			}},
		{"role=main is read alone", `<p>Outside.</p><div class="body" role="main"><h1>Doc</h1><p>` + long + `</p></div>`,
			[]Block{{Text: strings.TrimSpace(long), Headings: []string{"Doc"}}}},
		{"a single <article> is read alone", `<p>Outside.</p><article><h2>Post</h2><p>` + long + `</p></article>`,
			[]Block{{Text: strings.TrimSpace(long), Headings: []string{"Post"}}}},
		{"two <main> parts are both read, and nothing between them",
			`<main><p>` + long + `</p></main><p>Between.</p><main><p>Second main.</p></main>`,
			[]Block{{Text: strings.TrimSpace(long)}, {Text: "Second main."}}},
		{"several articles are all read, with the text between them",
			`<article><p>First post.</p></article><p>Between posts.</p><article><p>Second post.</p></article>`,
			[]Block{{Text: "First post."}, {Text: "Between posts."}, {Text: "Second post."}}},
		{"a <main> with almost no text gives way to the body without chrome",
			`<main><p>Loading…</p></main><div><p>` + long + `</p></div>`,
			[]Block{{Text: "Loading…"}, {Text: strings.TrimSpace(long)}}},
		{"a table left open inside <main> ends with it",
			`<main><p>` + long + `</p><table><tr><td>cell</main><p>After.</p><main><p>Next main.</p></main>`,
			[]Block{{Text: strings.TrimSpace(long)}, {Text: "cell", Table: true}, {Text: "Next main."}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := read(t, FormatHTML, []byte(strings.Replace(chromePage, "%s", tt.body, 1)))
			assertBlocks(t, got, tt.want)
			assertHas(t, blocksText(got), nil, chromeStrings)
		})
	}
}

func TestReadHTMLWithNoStructureKeepsEverything(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []Block
	}{
		{"plain paragraphs and divs", "<h1>T</h1><p>One.</p><div>Two <b>bold</b>.</div><p>Three",
			[]Block{{Text: "One.", Headings: []string{"T"}}, {Text: "Two bold.", Headings: []string{"T"}}, {Text: "Three", Headings: []string{"T"}}}},
		{"a page that is all chrome to the rules is read whole",
			`<div class="menu"><p>Menu page, the whole of it.</p></div><nav><p>A site map.</p></nav><form><p>Inside a form.</p></form>`,
			[]Block{{Text: "Menu page, the whole of it."}, {Text: "A site map."}, {Text: "Inside a form."}}},
		{"scripts, styles and the title stay out even then",
			`<title>T</title><nav><p>Only nav.</p><script>x()</script><style>p{}</style></nav>`,
			[]Block{{Text: "Only nav."}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertBlocks(t, read(t, FormatHTML, []byte(tt.data)), tt.want) })
	}
}

func TestReadHTMLLeavesOutChromeMarkedByRoleClassOrID(t *testing.T) {
	long := strings.Repeat("Content words. ", 40)
	body := "<p>" + long + "</p>"
	tests := []struct {
		name, chrome string
		inMain       bool // left out inside <main> too
	}{
		{"role=navigation", `<div role="navigation"><p>CHROME</p></div>`, true},
		{"role=banner", `<div role="banner">CHROME</div>`, true},
		{"role=contentinfo", `<div role="contentinfo">CHROME</div>`, true},
		{"role=complementary", `<section role="complementary">CHROME</section>`, true},
		{"role=search among other roles", `<div role="presentation search">CHROME</div>`, true},
		{"a breadcrumbs class in any case", `<ol class="x Breadcrumbs"><li>CHROME</li></ol>`, true},
		{"an id toc", `<div id="toc"><ul><li>CHROME</li></ul></div>`, true},
		{"Sphinx sidebar", `<div class="sphinxsidebar"><div class="sphinxsidebarwrapper">CHROME</div></div>`, true},
		{"Sphinx related bar", `<div class="related"><h3>Navigation</h3><ul><li>CHROME</li></ul></div>`, false},
		{"Sphinx footer", `<div class="footer">&copy; CHROME</div>`, false},
		{"a menu id", `<ul id="menu"><li>CHROME</li></ul>`, false},
		{"DocBook navheader", `<div class="navheader"><table><tr><td>CHROME</td></tr></table></div>`, true},
		{"DocBook navfooter", `<div class="navfooter"><hr><table><tr><td>CHROME</td></tr></table></div>`, true},
		{"a button and a form", `<button>CHROME</button><form><label>CHROME</label></form>`, true},
		{"an edit link and pagination", `<a class="edit-this-page">CHROME</a><div class="pagination">CHROME</div>`, true},
		{"Docusaurus", `<nav class="theme-doc-breadcrumbs">CHROME</nav><div class="theme-doc-toc-mobile">CHROME</div><div class="theme-doc-footer">CHROME</div>`, true},
		{"Hugo Docsy", `<div class="td-sidebar">CHROME</div><div class="td-page-meta">CHROME</div>`, true},
		{"upper-case tags and attributes", `<DIV CLASS="Toc"><P>CHROME</P></DIV>`, true},
		{"a custom element", `<docs-toc class="toc"><docs-toc>CHROME</docs-toc>CHROME</docs-toc>`, true},
		{"chrome nested in chrome of the same name", `<div class="toc"><div><div>CHROME</div></div>CHROME</div>`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := tt.chrome + body + "<p>After.</p>"
			assertBlocks(t, read(t, FormatHTML, []byte(page)), []Block{{Text: strings.TrimSpace(long)}, {Text: "After."}})
			got := blocksText(read(t, FormatHTML, []byte("<main>"+page+"</main>")))
			if strings.Contains(got, "CHROME") != !tt.inMain {
				t.Errorf("inside <main>, the text is %q", got)
			}
		})
	}
}

func TestReadHTMLLeavesOutChromeWithoutBreakingTheTextAroundIt(t *testing.T) {
	long := strings.Repeat("Content words. ", 40)
	tests := []struct {
		name, data string
		want       []Block
	}{
		{"a Sphinx ¶ link leaves the heading and the definition clean",
			`<h2>Usage<a class="headerlink" href="#u">¶</a></h2><dl><dt>f(x)<a class="headerlink" href="#f">¶</a></dt><dd><p>` + long + `</p></dd></dl>`,
			[]Block{{Text: "f(x)", Headings: []string{"Usage"}}, {Text: strings.TrimSpace(long), Headings: []string{"Usage"}}}},
		{"a block left out ends the paragraph", `<div>` + long + `<div class="toc">x</div>tail</div>`,
			[]Block{{Text: strings.TrimSpace(long)}, {Text: "tail"}}},
		{"headings inside chrome never enter the path", `<h1>Doc</h1><div class="sphinxsidebar"><h3>Navigation</h3></div><p>` + long + `</p>`,
			[]Block{{Text: strings.TrimSpace(long), Headings: []string{"Doc"}}}},
		{"a sidebar inside content is content", `<main><aside class="sidebar"><p>A sidebar note.</p></aside><p>` + long + `</p></main>`,
			[]Block{{Text: "A sidebar note."}, {Text: strings.TrimSpace(long)}}},
		{"an unclosed list item with a chrome class does not hide the rest", `<ul><li class="menu">one<li>two</ul><p>` + long + `</p>`,
			[]Block{{Text: "one"}, {Text: "two"}, {Text: strings.TrimSpace(long)}}},
		{"a chrome class on a void element does nothing", `<img class="toc"><input class="menu"><p>` + long + `</p>`,
			[]Block{{Text: strings.TrimSpace(long)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertBlocks(t, read(t, FormatHTML, []byte(tt.data)), tt.want) })
	}
}

func TestReadHTMLWithHostileChromeAndMainStaysFast(t *testing.T) {
	const n = 200_000
	long := strings.TrimSpace(strings.Repeat("Content words. ", 40))
	tests := []struct {
		name, src string
		want      []Block
	}{
		{"chrome nested deep", strings.Repeat(`<div class="toc">`, n) + "x" + strings.Repeat("</div>", n) + "<p>after</p>",
			[]Block{{Text: "after"}}},
		{"main nested deep", strings.Repeat(`<main><div role="main">`, n) + "deep" + strings.Repeat("</div></main>", n),
			[]Block{{Text: "deep"}}},
		{"chrome never closed", `<p>` + long + `</p><div class="sidebar">` + strings.Repeat("<div><p>in</p>", n),
			[]Block{{Text: long}}},
		{"a huge class attribute", `<div class="` + strings.Repeat("a ", 4*n) + `toc">x</div><p>after</p>`,
			[]Block{{Text: "after"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			got := read(t, FormatHTML, []byte(tt.src))
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			assertBlocks(t, got, tt.want)
		})
	}
}

// BenchmarkReadHTML reads the real pages of testdata/html and two large
// pages, one of text and one of tags alone: the reader tokenizes each page
// twice (a measuring pass, then the reading one).
func BenchmarkReadHTML(b *testing.B) {
	var pages []byte
	files, _ := filepath.Glob(filepath.Join("testdata", "html", "*.html"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		pages = append(pages, data...)
	}
	inputs := []struct {
		name string
		data []byte
	}{
		{"real pages", pages},
		{"10 MB of paragraphs", []byte(strings.Repeat(`<div class="section"><p>Some words of a paragraph, and more.</p></div>`, 10<<20/70))},
		{"10 MB of tags", []byte(strings.Repeat(`<div class="a"><span>`, 10<<20/21))},
		{"10 MB of links", []byte(strings.Repeat(`<a>`, 10<<20/3))},
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			for b.Loop() {
				if _, err := ReadInProcess(context.Background(), FormatHTML, in.data, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
