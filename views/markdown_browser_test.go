package views_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"weft/internal/testenv"
	"weft/views"
)

// hostileMath is TeX and markdown around math that tries to get markup,
// attributes or URLs through the math path: commands other converters
// turn into links, styles, classes, ids or characters; markup in text,
// names and delimiters; the MathML mutation-XSS shapes; and math cut by
// links, code and tables.
var hostileMath = []string{
	`$\href{javascript:alert(1)}{x}$`, `$\url{javascript:alert(1)}$`, `$\style{color:red}{x}$`,
	`$\class{x" onclick="alert(1)}{x}$`, `$\htmlId{x" onfocus="alert(1)}{y}$`, `$\htmlData{hx-get=/logout}{x}$`,
	`$\unicode{60}script\unicode{62}alert(1)\unicode{60}/script\unicode{62}$`, `$\unicode{x3C}$`,
	`$\textcolor{red" onmouseover="alert(1)}{x}$`, `$\color{<script>alert(1)</script>}x$`,
	`$\colorbox{red" style="x}{<b>x</b>}$`, `$\text{<script>alert(1)</script>}$`,
	`$\text{</mtext></math><img src=x onerror=alert(1)>}$`, `$\text{&lt;script&gt;&#60;b&#62;}$`,
	`$\text{\<b\>}$`, `$\operatorname{<img src=x onerror=alert(1)>}$`, `$\operatorname*{</mo><style>}$`,
	`$\mathrm{a<b>c}$`, `$\mathbb{<}$`, `$\not<$`, `$\not\text{<x}$`, `$\left< x \right>$`, `$\big< x \Big>$`,
	`$\middle< x$`, `$\begin{<b>}x\end{<b>}$`, `$\begin{array}{"><script>}a&b\end{array}$`,
	`$\sqrt[<script>]{x}$`, `$\xrightarrow[<b>]{</b>}$`, `$\substack{a<b\\c>d}$`, `$\hspace{1em" x="}$`,
	`$\mspace{"><style>}$`, `$\verb|<b>|$`, `$x</math><style><img src=x onerror=alert(1)>$`,
	`$\text{<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>}$`,
	`$\text{<math><semantics><annotation-xml encoding="text/html"><img src=x onerror=alert(1)></annotation-xml></semantics></math>}$`,
	`$\text{<maction actiontype="statusline">x</maction>}$`, `$\text{<!--}$ <img src=x onerror=alert(1)> $\text{-->}$`,
	`$\text{<![CDATA[}$<img src=x onerror=alert(1)>$\text{]]>}$`, `$\text{]]><b>}$`,
	"$\\text{a\x00b\x0bc\x7f\u0085}$", "$\\left\u202e x \\right.$",
	`$\text{${x}$}$`, `$$\text{$$}$$`, `\(\text{\)}<b>\)`, `\[\text{\]<b>}\]`,
	`[$x$](javascript:alert(1))`, `[$\text{x}$](https://ok.example/ "t\"onclick=x")`, `[a $b](https://x.example) c$`,
	"`$x$` $`y`$ $a`b$`", "| $a|b$ | $\\text{<b>}$ |\n|---|---|\n| $x$ | $$y$$ |",
	"<div>\n$$\n<script>alert(1)</script>\n$$\n</div>", "<script>\n$$\nx\n$$\n</script>",
	"$$\n\\text{</math></div><script>alert(1)</script>}\n$$", "$$\n\\begin{array}{c}\n<b>&x\\\\\n\\end{array}\n$$",
	"> $$\n> \\text{<b>}\n> $$", "- $$\n  \\text{<i>}\n  $$", "* [ ] $\\text{<input>}$",
	"# $\\text{<h1>}$ {#x onclick=y}", "$x$[^1]\n\n[^1]: $\\text{<b>}$", "www.example.com/$x$",
	"<https://example.com/$x$>", "$\\text{https://evil.example/}$ $\\text{javascript:alert(1)}$",
	"$\\text{[1]}$ \\(\\operatorname{[2]}\\)",
}

// mathMXSS are the known MathML mutation-XSS payloads, for the policy on
// its own (raw HTML never reaches it: goldmark escapes it; were that to
// change, the policy is the second line of defence).
var mathMXSS = []string{
	`<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>`,
	`<math><mtext><table><mglyph><style><!--</style><img title="--&gt;&lt;img src=1 onerror=alert(1)&gt;">`,
	`<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>`,
	`<math><mi><mglyph><svg><mtext><textarea><path id="</textarea><img onerror=alert(1) src=1>">`,
	`<math><mtext><h1><a><h6></a></h6><mglyph><svg><mtext><style><a title="</style><img src onerror=alert(1)>"></style></h1>`,
	`<math><annotation-xml encoding="text/html"><style><img src=x onerror=alert(1)></style></annotation-xml></math>`,
	`<math><semantics><annotation-xml encoding="application/xhtml+xml"><img src=x onerror=alert(1)></annotation-xml></semantics></math>`,
	`<math><style><img src=x onerror=alert(1)></style></math>`, `<math><mi><xmp></xmp><img src=x onerror=alert(1)></xmp></mi></math>`,
	`<math><mtext><noscript><style></noscript><img src=x onerror=alert(1)>`, `<table><math><mtext></table><style><img src=x onerror=alert(1)></style>`,
	`<math><mtable><mtr><mtd><table><mglyph><style><img src=x onerror=alert(1)>`, `<math><mo><p></mo><style><img src=x onerror=alert(1)></style>`,
	`<math><maction actiontype="toggle"><mi href="javascript:alert(1)">x</mi></maction></math>`,
	`<math><mi xlink:href="javascript:alert(1)" xmlns:xlink="http://www.w3.org/1999/xlink">x</mi></math>`,
	`<math><mtd class="math-l" style="x" id="y" hx-get="/logout" data-x="1">x</mtd></math>`,
	`<math><mspace width="1em" onfocus="alert(1)" tabindex="0"></mspace><mglyph src="javascript:alert(1)"></mglyph></math>`,
	`<math><mtext><plaintext><img src=x onerror=alert(1)>`, `<math><mtext><title><img src=x onerror=alert(1)></title>`,
	`<math><merror><mtext><iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe></mtext></merror></math>`,
}

// pieces are the fragments the random TeX below is made of.
var pieces = []string{
	"$", "$$", `\(`, `\)`, `\[`, `\]`, "{", "}", "<", ">", "&", `"`, "'", "`", "|", "*", "_", "^", "\n", " ",
	`\text{`, `\operatorname{`, `\mathrm{`, `\mathbb{`, `\left(`, `\right)`, `\left<`, `\right.`, `\middle|`,
	`\begin{array}{cc}`, `\end{array}`, `\begin{cases}`, `\end{cases}`, `\\`, `\frac`, `\sqrt[`, "]", `\not`,
	`\unicode{`, `\href{`, `\color{`, `\textcolor{`, "<script>", "</math>", "<mglyph>", "<style>", "<table>",
	"<!--", "-->", "<![CDATA[", "]]>", "&lt;", "&#60;", "x", "1", "=", `\alpha`, `\foo`, "[", "](http://a.example)",
	"\x00", "\u00a0", "\u2061",
}

// randomMath is n texts of random pieces, the same on every run.
func randomMath(n int) []string {
	r := rand.New(rand.NewPCG(21, 21))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for range 4 + r.IntN(24) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		out[i] = b.String()
	}
	return out
}

// browserParse has Chromium parse each HTML as the app inserts it (a div's
// innerHTML), and returns its serialization, the serialization of that
// parsed again, and what it found that the renderer must never emit. Past
// the index loose, MathML's names are also allowed as unknown (inert) HTML
// elements: the policy alone, given raw HTML, keeps <mtext> where the
// browser puts it in the HTML namespace.
const browserParse = `((outs, loose) => {
	const math = "http://www.w3.org/1998/Math/MathML", xhtml = "http://www.w3.org/1999/xhtml";
	const mathOK = new Set(["math","mrow","mi","mn","mo","mtext","mspace","msub","msup","msubsup","munder","mover",
		"munderover","mfrac","msqrt","mroot","mtable","mtr","mtd","mstyle","mphantom","merror"]);
	const htmlOK = new Set(["p","h1","h2","h3","h4","h5","h6","blockquote","hr","br","ul","ol","li","em","strong",
		"del","code","pre","div","span","a","table","thead","tbody","tr","th","td","button","input"]);
	const attrOK = new Set(["href","title","rel","target","class","align","start","type","checked","disabled","data-copy",
		"display","mathvariant","stretchy","fence","form","movablelimits","minsize","maxsize","width","linethickness",
		"accent","accentunder","displaystyle","scriptlevel"]);
	// An inert document: the same parser, but nothing loads or runs.
	const doc = document.implementation.createHTMLDocument("");
	const parse = s => { const d = doc.createElement("div"); d.innerHTML = s; return d; };
	return JSON.stringify(outs.map((o, i) => {
		const d = parse(o), s1 = d.innerHTML, s2 = parse(s1).innerHTML, bad = [];
		for (const el of d.querySelectorAll("*")) {
			const ok = el.namespaceURI === math ? mathOK : el.namespaceURI === xhtml ? htmlOK : null;
			if ((!ok || !ok.has(el.localName)) && !(i >= loose && el.namespaceURI === xhtml && mathOK.has(el.localName))) bad.push("element " + el.namespaceURI + " " + el.localName);
			for (const a of el.attributes) {
				if (a.namespaceURI || !attrOK.has(a.name)) bad.push("attribute " + a.name + " on " + el.localName);
				if (a.name === "href" && !/^(https?|mailto):/i.test(a.value)) bad.push("href " + a.value);
			}
		}
		const w = doc.createTreeWalker(d, NodeFilter.SHOW_COMMENT | NodeFilter.SHOW_PROCESSING_INSTRUCTION);
		if (w.nextNode()) bad.push("comment " + w.currentNode.nodeValue);
		return {s1, s2, bad};
	}));
})`

type parsed struct {
	S1, S2 string
	Bad    []string
}

func parseInChromium(t *testing.T, ctx context.Context, outs []string, loose int) []parsed {
	t.Helper()
	arg, err := json.Marshal(outs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[string](browserParse+"("+string(arg)+","+strconv.Itoa(loose)+")"))
	if err != nil {
		t.Fatalf("parse in chromium: %v", err)
	}
	var got []parsed
	if err := json.Unmarshal([]byte(res), &got); err != nil || len(got) != len(outs) {
		t.Fatalf("chromium's answer: %v (%d for %d)", err, len(got), len(outs))
	}
	return got
}

// The rendering of math (and of everything else) is what the browser makes
// of it: Chromium parses it into nothing but the allowed elements and
// attributes, parsing its serialization again gives the same tree, and the
// policy leaves that serialization as it is (no mutation XSS: sanitized
// markup that re-parses into something else). The same holds for the
// policy on its own, given the known MathML mutation-XSS payloads.
func TestBrowserMathRenderingIsAFixedPointOfChromiumsParserAndThePolicy(t *testing.T) {
	t.Parallel()
	ctx := testenv.Browser(t, 2*time.Minute)
	if _, err := chromedp.Run(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	var srcs []string
	for _, h := range append(hostileMath, randomMath(3000)...) {
		srcs = append(srcs, h, "a "+h+" b", "- "+h, "> "+h, "| x |\n|---|\n| "+h+" |", "**"+h+"**", "[a "+h+"](https://l.example)")
	}
	outs := make([]string, len(srcs))
	for i, s := range srcs {
		outs[i] = views.RenderMarkdown(s)
	}
	loose := len(outs)
	for _, h := range mathMXSS {
		srcs = append(srcs, "the policy alone on "+h)
		outs = append(outs, views.SanitizeRendered(h))
	}
	first := parseInChromium(t, ctx, outs, loose)
	// The policy admits no button or input: they are put in after
	// sanitizing (markdownFinish); they are left out of the comparison.
	controls := strings.NewReplacer(`<button type="button" class="copy" data-copy="">Copy</button>`, "",
		`<input type="checkbox" checked="" disabled="">`, "", `<input type="checkbox" disabled="">`, "")
	resanitized := make([]string, len(first))
	for i, p := range first {
		first[i].S1 = controls.Replace(p.S1)
		first[i].S2 = controls.Replace(p.S2)
		resanitized[i] = views.SanitizeRendered(first[i].S1)
	}
	again := parseInChromium(t, ctx, resanitized, loose)
	failures := 0
	for i, p := range first {
		switch {
		case len(p.Bad) > 0:
			t.Errorf("%q renders to %s\nwhich Chromium parses with %v", srcs[i], outs[i], p.Bad)
		case p.S1 != p.S2:
			t.Errorf("%q renders to %s\nwhich Chromium serializes as %s\nand parses again as %s", srcs[i], outs[i], p.S1, p.S2)
		case again[i].S1 != p.S1:
			t.Errorf("%q renders to %s\nwhich Chromium serializes as %s\nand sanitized again as %s", srcs[i], outs[i], p.S1, again[i].S1)
		default:
			continue
		}
		if failures++; failures > 20 {
			t.Fatal("too many failures")
		}
	}
}
