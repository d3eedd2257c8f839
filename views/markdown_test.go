package views

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// hostileMarkdown is model output that tries to get markup, script or
// requests into the page.
var hostileMarkdown = []struct {
	name string
	src  string
	// mustNot are substrings (case-insensitive) the output's markup (its
	// tags and attributes, text left out) must not contain. Raw HTML a
	// model wrote is shown as escaped text, so it may appear as text;
	// assertInert checks tags, attributes and URLs too.
	mustNot []string
	// blockOnly: the input is a block construct (a fence), only tried where
	// a block can start.
	blockOnly bool
}{
	{"script", `<script>alert(1)</script>`, []string{"<script"}, false},
	{"script mixed case", `<ScRiPt src="https://evil/x.js"></sCrIpT>`, []string{"<script", "evil"}, false},
	{"img onerror", `<img src=x onerror=alert(1)>`, []string{"<img", "onerror"}, false},
	{"javascript link", `[x](javascript:alert(1))`, []string{"href"}, false},
	{"javascript link mixed case", `[x](JaVaScRiPt:alert(1))`, []string{"href"}, false},
	{"javascript link entity", `[x](javascript&#58;alert(1))`, []string{"href"}, false},
	{"javascript link spaces", "[x](<java\tscript:alert(1)>)", []string{"href"}, false},
	{"vbscript link", `[x](vbscript:msgbox(1))`, []string{"href"}, false},
	{"data link", `[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)`, []string{"href"}, false},
	{"file link", `[x](file:///etc/passwd)`, []string{"href"}, false},
	{"javascript autolink", `<javascript:alert(1)>`, []string{"href"}, false},
	{"raw a data", `<a href="data:text/html,<script>alert(1)</script>">x</a>`, []string{"data:", "<script", "href"}, false},
	{"raw a javascript", `<a href="javascript:alert(1)">x</a>`, []string{"javascript:", "href"}, false},
	{"relative link", `[logout](/logout)`, []string{"href"}, false},
	{"protocol-relative link", `[x](//evil.example/x)`, []string{"href"}, false},
	{"hx-get", `<div hx-get="/logout" hx-trigger="load">x</div>`, []string{"hx-", "/logout"}, false},
	{"data-hx-post", `<span data-hx-post="/x">x</span>`, []string{"hx-"}, false},
	{"hx-on", `<b hx-on:click="alert(1)">x</b>`, []string{"hx-"}, false},
	{"sse-connect", `<div sse-connect="/x" sse-swap="message">x</div>`, []string{"sse-"}, false},
	{"hx-ext sse", `<div hx-ext="sse" data-sse-connect="/x">x</div>`, []string{"hx-", "sse-"}, false},
	{"style element", `<style>body{display:none}</style>`, []string{"<style"}, false},
	{"style attribute", `<p style="position:fixed;inset:0">x</p>`, []string{"style=", "position"}, false},
	{"iframe", `<iframe src="https://evil/"></iframe>`, []string{"<iframe", "evil"}, false},
	{"svg onload", `<svg onload=alert(1)><circle r=1 /></svg>`, []string{"<svg", "onload"}, false},
	{"math", `<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>`, []string{"<math", "<style", "<img"}, false},
	{"form", `<form action="/logout" method="post"><button>go</button></form>`, []string{"<form", "/logout"}, false},
	{"input", `<input type="text" name="q" autofocus onfocus=alert(1)>`, []string{"onfocus", "autofocus", `type="text"`}, false},
	{"object embed", `<object data="x"></object><embed src="x">`, []string{"<object", "<embed"}, false},
	{"meta refresh", `<meta http-equiv="refresh" content="0;url=https://evil/">`, []string{"<meta", "refresh"}, false},
	{"base", `<base href="https://evil/">`, []string{"<base"}, false},
	{"link stylesheet", `<link rel="stylesheet" href="https://evil/x.css">`, []string{"<link", "evil"}, false},
	{"comment", `<!-- hi --><!--[if IE]><script>x</script><![endif]-->`, []string{"<!--", "<script"}, false},
	{"markdown image", `![a](http://evil/x.png)`, []string{"<img"}, false},
	{"markdown image javascript", `![a](javascript:alert(1))`, []string{"<img", "javascript"}, false},
	{"markdown image data", `![a](data:image/png;base64,iVBORw0KGgo=)`, []string{"<img", "data:"}, false},
	{"reference image", "![a][r]\n\n[r]: http://evil/x.png", []string{"<img"}, false},
	{"code fence info string", "```\"><script>alert(1)</script>\nx\n```", []string{"<script"}, true},
	{"code fence attributes", "```go {style=monokai linenos=table hl_lines=[1]}\nvar x = 1\n```", []string{"monokai", "lntable", "<table", `"hl"`, "lnt"}, true},
	{"heading attributes", "# h {#x .y onclick=alert(1)}", []string{"id=", `class="y"`}, false},
}

// hostileContexts wrap each hostile input so that it goes through
// goldmark's block parser as well as its inline parser.
var hostileContexts = []struct {
	name string
	wrap func(string) string
}{
	{"alone", func(s string) string { return s }},
	{"inline", func(s string) string { return "before " + s + " after" }},
	{"list item", func(s string) string { return "- item\n- " + s }},
	{"blockquote", func(s string) string { return "> " + s }},
	{"table cell", func(s string) string { return "| a |\n|---|\n| " + s + " |" }},
}

func TestRenderMarkdownLeavesHostileInputInertInEveryContext(t *testing.T) {
	for _, tc := range hostileMarkdown {
		for _, ctx := range hostileContexts {
			if tc.blockOnly && (ctx.name == "inline" || ctx.name == "table cell") {
				continue
			}
			t.Run(tc.name+"/"+ctx.name, func(t *testing.T) {
				src := ctx.wrap(tc.src)
				out := RenderMarkdown(src)
				lower := strings.ToLower(markupOnly(out))
				for _, bad := range tc.mustNot {
					if strings.Contains(lower, strings.ToLower(bad)) {
						t.Errorf("output contains %q\nsrc: %q\nout: %s", bad, src, out)
					}
				}
				assertInert(t, out)
			})
		}
	}
}

// A code fence shows HTML as escaped text and keeps it intact.
func TestRenderMarkdownCodeFenceEscapes(t *testing.T) {
	for _, lang := range []string{"", "html", "go", "nosuchlanguage"} {
		t.Run("lang="+lang, func(t *testing.T) {
			src := "```" + lang + "\n<script>alert(1)</script>\n<img src=x onerror=alert(1)>\n<div hx-get=\"/logout\" style=\"x\">\n```"
			out := RenderMarkdown(src)
			assertInert(t, out)
			if strings.Contains(out, "<script") || strings.Contains(out, "<img") {
				t.Errorf("raw HTML in code fence output: %s", out)
			}
			code := findAll(parse(t, out), atom.Code)
			if len(code) != 1 {
				t.Fatalf("want 1 <code>, got %d: %s", len(code), out)
			}
			want := "<script>alert(1)</script>\n<img src=x onerror=alert(1)>\n<div hx-get=\"/logout\" style=\"x\">\n"
			if got := textOf(code[0]); got != want {
				t.Errorf("code text = %q, want %q", got, want)
			}
		})
	}
}

// Lines that look like server-sent events stay text, and the output has no
// newline characters at all, so it cannot start SSE fields of its own.
func TestRenderMarkdownSSELookalike(t *testing.T) {
	for _, src := range []string{
		"event: done\ndata: <b>x</b>",
		"hello\n\nevent: done\ndata: <b>x</b>\n\n",
		"```\nevent: done\ndata: <b>x</b>\n\nid: 1\nretry: 0\n```",
		"    event: done\n    data: x",
		"> event: done\n> data: x",
	} {
		out := RenderMarkdown(src)
		assertInert(t, out)
		if strings.ContainsAny(out, "\r\n") {
			t.Errorf("output has a newline: %q", out)
		}
		if strings.Contains(out, "<b>") {
			t.Errorf("output has <b>: %q", out)
		}
		if !strings.Contains(textOf(parse(t, out)), "\ndata: ") {
			t.Errorf("text lost: %q", out)
		}
	}
	// Newlines in attribute values are character references too.
	out := RenderMarkdown("[t](http://a \"x\ny\")")
	if strings.ContainsAny(out, "\r\n") || !strings.Contains(out, `title="x&#10;y"`) {
		t.Errorf("title newline: %q", out)
	}
	if got := attr(findAll(parse(t, out), atom.A)[0], "title"); got != "x\ny" {
		t.Errorf("title parses as %q", got)
	}
}

// The policy on its own (if goldmark ever let HTML through) still strips
// what the brief forbids.
func TestTheHTMLPolicyAloneStripsWhatMarkdownMustNotLetThrough(t *testing.T) {
	for _, tc := range hostileMarkdown {
		out := markdownPolicy.Sanitize(tc.src)
		assertInertWith(t, out, false)
	}
	for _, tc := range []struct{ src, want string }{
		{`<img src="https://example.com/x.png" alt="x">`, ``},
		{`<a href="/logout">x</a>`, `x`},
		{`<a href="https://ok.example/" target="_self" rel="opener">x</a>`, `<a href="https://ok.example/" rel="nofollow noreferrer noopener" target="_blank">x</a>`},
		{`<input type="text"><input type="hidden" name="x">`, ``},
		{`<span class="a&quot;b" id="x" title="t">x</span><pre class="x{y}">y</pre>`, `<span>x</span><pre>y</pre>`},
		{`<div data-hx-get="/x" data-copy>x</div>`, `<div>x</div>`},
		// No button or input passes the policy: the copy buttons and task
		// checkboxes are put in after sanitizing.
		{`<button type="button" class="copy" data-copy>x</button>`, `x`},
		{`<button type="submit" formaction="/x">x</button>`, `x`},
		{`<input type="checkbox" disabled>`, ``},
		// MathML: the presentation elements the converter writes, with its
		// attributes and values; nothing that can hold HTML or act.
		{`<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>`, `<math><mtext><table>`},
		{`<math><semantics><annotation-xml encoding="text/html"><b>x</b></annotation-xml></semantics></math>`, `<math>x</math>`},
		{`<math href="javascript:alert(1)" display="inline"><maction actiontype="statusline"><mi xlink:href="https://x.example/" mathvariant="bold">x</mi></maction></math>`,
			`<math><mi>x</mi></math>`},
		{`<math display="block"><mo stretchy="true" form="prefix" minsize="1.2em" lspace="9em">(</mo><mspace width="1em" height="9em"></mspace><mtd class="math-l other"></mtd></math>`,
			`<math display="block"><mo stretchy="true" form="prefix" minsize="1.2em">(</mo><mspace width="1em"></mspace><mtd></mtd></math>`},
	} {
		out := markdownPolicy.Sanitize(tc.src)
		assertInertWith(t, out, false)
		if out != tc.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.src, out, tc.want)
		}
	}
}

func TestRenderMarkdownRendersCommonMarkdownAsHTML(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings of the output
	}{
		{"headings", "# One\n\n## Two\n\n###### Six", []string{"<h1>One</h1>", "<h2>Two</h2>", "<h6>Six</h6>"}},
		{"emphasis", "*a* **b** ~~c~~", []string{"<em>a</em>", "<strong>b</strong>", "<del>c</del>"}},
		{"unordered list", "- a\n- b", []string{"<ul>", "<li>a</li>", "<li>b</li>"}},
		{"ordered list start", "3. a\n4. b", []string{`<ol start="3">`, "<li>a</li>"}},
		{"task list", "- [x] done\n- [ ] todo", []string{`<li><input type="checkbox" checked disabled> done</li>`, `<li><input type="checkbox" disabled> todo</li>`}},
		{"table", "| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |", []string{"<table>", "<thead>", `<th align="left">a</th>`, `<th align="center">b</th>`, `<td align="right">3</td>`}},
		{"inline code escapes", "use `<b>bold</b>` & `a && b`", []string{"<code>&lt;b&gt;bold&lt;/b&gt;</code>", "&amp;", "<code>a &amp;&amp; b</code>"}},
		{"blockquote", "> quoted", []string{"<blockquote>", "<p>quoted</p>"}},
		{"hard wraps off", "one\ntwo", []string{"<p>one&#10;two</p>"}},
		{"http link", "[docs](https://example.com/a?b=1&c=2#d)", []string{`<a href="https://example.com/a?b=1&amp;c=2#d" rel="nofollow noreferrer noopener" target="_blank">docs</a>`}},
		{"link title", `[x](http://example.com "T")`, []string{`href="http://example.com"`, `title="T"`}},
		{"linkify", "see https://example.com/x and www.example.org.", []string{`<a href="https://example.com/x" rel="nofollow noreferrer noopener" target="_blank">https://example.com/x</a>`, `href="http://www.example.org"`}},
		{"autolink", "<https://example.com>", []string{`href="https://example.com"`}},
		{"mailto no target", "[mail](mailto:a@example.com)", []string{`<a href="mailto:a@example.com">mail</a>`}},
		{"image becomes link", "![the alt](https://example.com/x.png)", []string{`<a href="https://example.com/x.png" rel="nofollow noreferrer noopener" target="_blank">the alt</a>`}},
		{"image without alt shows url", "![](https://example.com/x.png)", []string{`>https://example.com/x.png</a>`}},
		{"relative link keeps text", "[logout](/logout)", []string{"<p>logout</p>"}},
		{"go block", "```go\nfunc main() {}\n```", []string{
			`<div class="code-block"><div class="code-head"><span class="code-lang">go</span><button type="button" class="copy" data-copy>Copy</button></div><pre class="chroma"><code>`,
			`<span class="kd">func</span>`, `<span class="nf">main</span>`, `</code></pre></div>`,
		}},
		{"unknown language", "```nosuchlang\na < b\n```", []string{
			`<span class="code-lang">nosuchlang</span><button type="button" class="copy" data-copy>Copy</button></div><pre class="chroma"><code class="language-nosuchlang">a &lt; b&#10;</code></pre></div>`,
		}},
		{"no language", "```\nplain\n```", []string{
			`<div class="code-head"><button type="button" class="copy" data-copy>Copy</button></div><pre class="chroma"><code>plain&#10;</code></pre>`,
		}},
		{"c++ label", "```c++\nint x;\n```", []string{`<span class="code-lang">c++</span>`, `<span class="kt">int</span>`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := RenderMarkdown(tc.src)
			assertInert(t, out)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q\nout: %s", w, out)
				}
			}
		})
	}
}

func TestRenderMarkdownBigCodeBlockNotHighlighted(t *testing.T) {
	src := "```go\n" + strings.Repeat("var x = 1 // <b>\n", maxHighlightBytes/16) + "```"
	out := RenderMarkdown(src)
	assertInert(t, out)
	if strings.Contains(out, `class="kd"`) || !strings.Contains(out, `<code class="language-go">var x = 1 // &lt;b&gt;`) {
		t.Errorf("big block should be plain: %.300s", out)
	}
}

// markupOnly drops the text between tags, leaving tags and attributes
// (text can hold no raw "<": it is escaped).
func markupOnly(out string) string {
	return textBetweenTags.ReplaceAllString(">"+out+"<", "><")
}

var textBetweenTags = regexp.MustCompile(`>[^<]*<`)

func TestRenderMarkdownShowsRawHTMLAsText(t *testing.T) {
	out := RenderMarkdown("Use <div class=\"x\"> here.\n\n<script>alert(1)</script>")
	assertInert(t, out)
	for _, want := range []string{"Use &lt;div class=&#34;x&#34;&gt; here.", "&lt;script&gt;alert(1)&lt;/script&gt;"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q: %s", want, out)
		}
	}
}

func TestRenderMarkdownOfBlankTextIsEmpty(t *testing.T) {
	for _, src := range []string{"", " ", "\n\n"} {
		if out := RenderMarkdown(src); out != "" {
			t.Errorf("RenderMarkdown(%q) = %q, want empty", src, out)
		}
	}
}

func TestTheMarkdownComponentRendersLikeRenderMarkdown(t *testing.T) {
	src := "# T\n\n```go\nx := `<i>`\n```"
	var buf bytes.Buffer
	if err := Markdown(src).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), RenderMarkdown(src); got != want {
		t.Errorf("Markdown rendered %q, RenderMarkdown gave %q", got, want)
	}
}

func TestRenderMarkdownGivesTheSameHTMLFromManyGoroutines(t *testing.T) {
	want := RenderMarkdown(benchAnswer)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if got := RenderMarkdown(benchAnswer); got != want {
					t.Error("concurrent render differs")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkRenderMarkdown(b *testing.B) {
	b.SetBytes(int64(len(benchAnswer)))
	b.ReportAllocs()
	for b.Loop() {
		RenderMarkdown(benchAnswer)
	}
}

// benchAnswer is a typical ~4 KB model answer with a code block.
var benchAnswer = func() string {
	var b strings.Builder
	b.WriteString("## Reading a file line by line in Go\n\n")
	b.WriteString("Use a **`bufio.Scanner`** wrapped around the *file*; it handles buffering for you. ")
	b.WriteString("See the [package docs](https://pkg.go.dev/bufio#Scanner) or https://go.dev/doc for details.\n\n")
	b.WriteString("```go\npackage main\n\nimport (\n\t\"bufio\"\n\t\"fmt\"\n\t\"log\"\n\t\"os\"\n)\n\n")
	b.WriteString("func main() {\n\tf, err := os.Open(\"input.txt\")\n\tif err != nil {\n\t\tlog.Fatal(err)\n\t}\n\tdefer f.Close()\n\n")
	b.WriteString("\tsc := bufio.NewScanner(f)\n\tsc.Buffer(make([]byte, 64*1024), 1<<20) // long lines\n\tn := 0\n")
	b.WriteString("\tfor sc.Scan() {\n\t\tn++\n\t\tif n%1000 == 0 && len(sc.Text()) > 0 {\n\t\t\tfmt.Printf(\"%d: %q\\n\", n, sc.Text())\n\t\t}\n\t}\n")
	b.WriteString("\tif err := sc.Err(); err != nil {\n\t\tlog.Fatal(err)\n\t}\n\tfmt.Println(\"lines:\", n)\n}\n```\n\n")
	b.WriteString("### Notes\n\n")
	for b.Len() < 3800 {
		b.WriteString("- The scanner's default token limit is 64 KiB; call `Buffer` to raise it, otherwise `Scan` stops with `bufio.ErrTooLong`.\n")
		b.WriteString("- Always check `sc.Err()` after the loop & close the file (`defer f.Close()`).\n")
	}
	b.WriteString("\n| Approach | Memory | Speed |\n|:--|:-:|--:|\n| `bufio.Scanner` | low | fast |\n| `os.ReadFile` + `strings.Split` | high | fast |\n| `bufio.Reader.ReadString` | low | ok |\n\n")
	b.WriteString("> Tip: for *huge* files, process each line as you go instead of collecting them.\n")
	return b.String()
}()

// --- helpers ---------------------------------------------------------------

var (
	// Attributes the renderer may emit; everything else is a failure.
	allowedAttrs = map[string]bool{
		"href": true, "title": true, "rel": true, "target": true, "class": true,
		"align": true, "start": true, "type": true, "checked": true,
		"disabled": true, "data-copy": true,
	}
	forbiddenAttrPrefixes = []string{"on", "hx-", "data-hx-", "sse-", "data-sse-", "style"}
	forbiddenElements     = map[atom.Atom]bool{
		atom.Script: true, atom.Style: true, atom.Iframe: true, atom.Img: true,
		atom.Svg: true, atom.Form: true, atom.Object: true,
		atom.Embed: true, atom.Link: true, atom.Meta: true, atom.Base: true,
		atom.Textarea: true, atom.Select: true, atom.Video: true, atom.Audio: true,
		atom.Source: true, atom.Picture: true, atom.Frame: true, atom.Frameset: true,
		atom.Template: true, atom.Noscript: true,
	}
	// The MathML the math renderer writes (markdown_math.go); elements of
	// any other namespace, and these elsewhere, are failures.
	mathElements = map[string]bool{
		"math": true, "mrow": true, "mi": true, "mn": true, "mo": true, "mtext": true, "mspace": true,
		"msub": true, "msup": true, "msubsup": true, "munder": true, "mover": true, "munderover": true,
		"mfrac": true, "msqrt": true, "mroot": true, "mtable": true, "mtr": true, "mtd": true,
		"mstyle": true, "mphantom": true, "merror": true,
	}
	mathAttrs = map[string]bool{
		"display": true, "mathvariant": true, "stretchy": true, "fence": true, "form": true,
		"movablelimits": true, "minsize": true, "maxsize": true, "width": true, "linethickness": true,
		"accent": true, "accentunder": true, "displaystyle": true, "scriptlevel": true, "class": true,
	}
	safeHref = regexp.MustCompile(`^(https?:|mailto:)`) // "http:" alone is inert (found by fuzzing)
	// A start tag carrying a forbidden attribute (escaped text cannot match:
	// its "<" is written as &lt;).
	hostileTag = regexp.MustCompile(`(?i)<[a-z][^>]*\s(on[a-z]+|style|hx-[a-z:-]+|data-hx-[a-z:-]+|sse-[a-z-]+)\s*=`)
	// A start tag with a URL of a forbidden scheme (the text "href=data:" is
	// no URL: found by fuzzing).
	badScheme = regexp.MustCompile(`(?i)<[a-z][^>]*\s(href|src|action|formaction)\s*=\s*["']?\s*(javascript|data|vbscript):`)
)

// assertInert checks out both as a string and as a parsed tree.
func assertInert(t *testing.T, out string) {
	t.Helper()
	assertInertWith(t, out, true)
}

// assertInertWith is assertInert; controls also requires every input to be
// a disabled checkbox and every button to be type=button.
func assertInertWith(t *testing.T, out string, controls bool) {
	t.Helper()
	if m := hostileTag.FindString(out); m != "" {
		t.Errorf("output has a forbidden attribute %q: %s", m, out)
	}
	if m := badScheme.FindString(out); m != "" {
		t.Errorf("output has a forbidden URL %q: %s", m, out)
	}
	lower := strings.ToLower(out)
	for _, bad := range []string{"<script", "<style", "<iframe", "<img", "<svg", "<form", "<!--"} {
		if strings.Contains(lower, bad) {
			t.Errorf("output contains %q: %s", bad, out)
		}
	}
	if controls && strings.ContainsAny(out, "\r\n") {
		t.Errorf("output contains a raw newline: %q", out)
	}

	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.CommentNode:
			t.Errorf("comment in output: %q", n.Data)
		case html.ElementNode:
			inMath := n.Namespace == "math" && mathElements[n.Data]
			if forbiddenElements[n.DataAtom] || n.Namespace != "" && !inMath {
				t.Errorf("forbidden element <%s> (namespace %q) in: %s", n.Data, n.Namespace, out)
			}
			for _, a := range n.Attr {
				key := strings.ToLower(a.Key)
				for _, p := range forbiddenAttrPrefixes {
					if strings.HasPrefix(key, p) {
						t.Errorf("forbidden attribute %s=%q on <%s> in: %s", a.Key, a.Val, n.Data, out)
					}
				}
				if inMath && !mathAttrs[key] || !inMath && !allowedAttrs[key] || a.Namespace != "" {
					t.Errorf("unexpected attribute %s=%q on <%s> in: %s", a.Key, a.Val, n.Data, out)
				}
				if key == "href" && !safeHref.MatchString(a.Val) {
					t.Errorf("unsafe href %q in: %s", a.Val, out)
				}
				if key == "target" && (a.Val != "_blank" || !strings.Contains(attr(n, "rel"), "noopener")) {
					t.Errorf("target without rel=noopener in: %s", out)
				}
			}
			switch {
			case !controls:
			case n.DataAtom == atom.Input:
				if attr(n, "type") != "checkbox" || !hasAttr(n, "disabled") {
					t.Errorf("input other than a disabled checkbox in: %s", out)
				}
			case n.DataAtom == atom.Button:
				if attr(n, "type") != "button" {
					t.Errorf("button without type=button in: %s", out)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(parse(t, out))
}

// parse parses out as the content of a <div>, the way the browser would.
func parse(t *testing.T, out string) *html.Node {
	t.Helper()
	ctx := &html.Node{Type: html.ElementNode, Data: "div", DataAtom: atom.Div}
	nodes, err := html.ParseFragment(strings.NewReader(out), ctx)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, n := range nodes {
		ctx.AppendChild(n)
	}
	return ctx
}

func findAll(n *html.Node, a atom.Atom) []*html.Node {
	var found []*html.Node
	if n.Type == html.ElementNode && n.DataAtom == a {
		found = append(found, n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		found = append(found, findAll(c, a)...)
	}
	return found
}

func textOf(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textOf(c))
	}
	return b.String()
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}
