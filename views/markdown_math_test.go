package views

import (
	"strings"
	"testing"
)

func TestMathInAnswersIsRenderedAsMathMLOnTheServer(t *testing.T) {
	tests := []struct {
		name    string
		src     string
		want    []string // substrings of the output
		wantNot []string
	}{
		{"inline dollars", "Euler: $e^{i\\pi}+1=0$.", []string{
			"<p>Euler: <math><mrow><msup><mi>e</mi><mrow><mi>i</mi><mi>π</mi></mrow></msup><mo>+</mo><mn>1</mn><mo>=</mo><mn>0</mn></mrow></math>.</p>"}, nil},
		{"inline parens", `so \(x_1\) is`, []string{"<math><msub><mi>x</mi><mn>1</mn></msub></math>"}, nil},
		{"display dollars in a line", "then $$a^2$$ too", []string{`<span class="math-display"><math display="block"><msup>`}, nil},
		{"display brackets in a line", `then \[a=b\] too`, []string{`<span class="math-display"><math display="block"><mrow><mi>a</mi><mo>=</mo>`}, nil},
		{"dollar block", "$$\n\\frac{1}{2}\n$$", []string{`<div class="math-display"><math display="block"><mfrac><mn>1</mn><mn>2</mn></mfrac></math></div>`}, []string{"<p>"}},
		{"bracket block after a paragraph", "The sum is:\n\\[\n\\sum_{i=1}^n i\n\\]\nas shown.", []string{
			"<p>The sum is:</p>", `<div class="math-display"><math display="block"><mrow><munderover><mo movablelimits="true">∑</mo>`, "<p>as shown.</p>"}, nil},
		{"one-line block", "$$ x $$", []string{`<div class="math-display"><math display="block"><mi>x</mi></math></div>`}, nil},
		{"display spanning lines of a paragraph", "so \\[ a =\n b \\] holds", []string{`<math display="block"><mrow><mi>a</mi><mo>=</mo><mi>b</mi></mrow></math>`}, nil},
		{"block in a list item", "- item\n\n  $$\n  x\n  $$", []string{"<li>", `<math display="block"><mi>x</mi></math>`}, nil},
		{"prices stay text", "It costs $5 and $10, or US$6.", []string{"It costs $5 and $10, or US$6."}, []string{"<math"}},
		{"a price range stays text", "from $5-$10 a month", []string{"from $5-$10 a month"}, []string{"<math"}},
		{"space after the opener", "$ x$", []string{"$ x$"}, []string{"<math"}},
		{"escaped dollars", `\$x\$ and \$y$`, []string{"$x$ and $y$"}, []string{"<math"}},
		{"escaped brackets are not math", `see \[1\] and \(a\)`, []string{"see [1] and <math><mi>a</mi></math>"}, nil},
		{"not in code spans", "use `$x$` or `\\(y\\)`", []string{"<code>$x$</code>", `<code>\(y\)</code>`}, []string{"<math"}},
		{"not in code blocks", "```\n$x$\n$$\ny\n$$\n```", []string{"$x$&#10;$$&#10;y&#10;$$"}, []string{"<math"}},
		{"unclosed block is text", "$$\nx + y", []string{"<p>$$&#10;x + y</p>"}, []string{"<math"}},
		{"unreadable TeX shows its source", "$\\frac{a$ and\n\n$$\n}x\n$$", []string{
			`<code class="math-tex">$\frac{a$</code>`, `<pre class="math-tex"><code>}x&#10;</code></pre>`}, []string{"<math"}},
		{"unknown command is marked", "$\\foo x$", []string{"<merror><mtext>\\foo</mtext></merror><mi>x</mi>"}, nil},
		{"markup in text is text", "$\\text{<img src=x onerror=alert(1)>}$", []string{"<mtext>&lt;img src=x onerror=alert(1)&gt;</mtext>"}, []string{"<img"}},
		{"markup as a symbol is text", "$a<b>c$", []string{"<mo>&lt;</mo><mi>b</mi><mo>&gt;</mo>"}, []string{"<b>"}},
		{"citations stay outside math", "$x$ [1]", []string{"<math><mi>x</mi></math> [1]"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := RenderMarkdown(tc.src)
			assertInert(t, out)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %s\n got %s", w, out)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("output has %s\n got %s", w, out)
				}
			}
		})
	}
}

func TestTeXBecomesMathMLCore(t *testing.T) {
	tests := []struct{ tex, want string }{
		{`x^2_i`, "<msubsup><mi>x</mi><mi>i</mi><mn>2</mn></msubsup>"},
		{`x^23`, "<mrow><msup><mi>x</mi><mn>2</mn></msup><mn>3</mn></mrow>"},
		{`3.14r`, "<mrow><mn>3.14</mn><mi>r</mi></mrow>"},
		{`f'(x)`, `<mrow><msup><mi>f</mi><mo>′</mo></msup><mo stretchy="false">(</mo><mi>x</mi><mo stretchy="false">)</mo></mrow>`},
		{`f''^2`, "<msup><mi>f</mi><mrow><mo>′′</mo><mn>2</mn></mrow></msup>"},
		{`\frac12`, "<mfrac><mn>1</mn><mn>2</mn></mfrac>"},
		{`\dfrac{a}{b}`, `<mstyle displaystyle="true" scriptlevel="0"><mfrac><mi>a</mi><mi>b</mi></mfrac></mstyle>`},
		{`{a \over b}`, "<mfrac><mi>a</mi><mi>b</mi></mfrac>"},
		{`\binom{n}{k}`, `<mrow><mo>(</mo><mfrac linethickness="0"><mi>n</mi><mi>k</mi></mfrac><mo>)</mo></mrow>`},
		{`\sqrt[3]{x}`, "<mroot><mi>x</mi><mn>3</mn></mroot>"},
		{`\sqrt x`, "<msqrt><mi>x</mi></msqrt>"},
		{`\sum_{k=0}^\infty`, `<munderover><mo movablelimits="true">∑</mo><mrow><mi>k</mi><mo>=</mo><mn>0</mn></mrow><mi>∞</mi></munderover>`},
		{`\int_0^1`, "<msubsup><mo>∫</mo><mn>0</mn><mn>1</mn></msubsup>"},
		{`\int\limits_0^1`, "<munderover><mo>∫</mo><mn>0</mn><mn>1</mn></munderover>"},
		{`\lim_{n\to\infty}`, `<munder><mo form="prefix" movablelimits="true">lim</mo>`},
		{`\sin^2 x`, "<mrow><msup><mi>sin</mi><mn>2</mn></msup><mo>\u2061</mo><mi>x</mi></mrow>"},
		{`\operatorname{rank} A`, "<mrow><mi>rank</mi><mo>\u2061</mo><mi>A</mi></mrow>"},
		{`\mathbb{R}^n \mathcal{L} \mathfrak{g} \mathbf{v1}`, "<mi>ℝ</mi>"},
		{`\mathcal{L}`, "<mi>ℒ</mi>"},
		{`\mathbf{v}`, "<mi>𝐯</mi>"},
		{`\mathrm{d}x`, `<mrow><mi mathvariant="normal">d</mi><mi>x</mi></mrow>`},
		{`\mathrm{max}`, "<mi>max</mi>"},
		{`\Gamma`, `<mi mathvariant="normal">Γ</mi>`},
		{`\hat{x} \overline{AB}`, `<mover accent="true"><mi>x</mi><mo stretchy="false">^</mo></mover>`},
		{`\overline{AB}`, `<mover accent="true"><mrow><mi>A</mi><mi>B</mi></mrow><mo stretchy="true">‾</mo></mover>`},
		{`\left( x \middle| y \right]`, `<mrow><mo fence="true" form="prefix" stretchy="true">(</mo><mi>x</mi><mo stretchy="true">|</mo><mi>y</mi><mo fence="true" form="postfix" stretchy="true">]</mo></mrow>`},
		{`\left. x \right\}`, `<mrow><mi>x</mi><mo fence="true" form="postfix" stretchy="true">}</mo></mrow>`},
		{`\bigl( x \bigr)`, `<mo stretchy="true" minsize="1.2em" maxsize="1.2em">(</mo>`},
		{`\text{if } x \ne 0`, "<mtext>if </mtext>"},
		{`a \not= b \not\in C`, "<mo>=\u0338</mo>"},
		{`\alpha\,\beta\quad\gamma`, `<mi>α</mi><mspace width="0.1667em"></mspace><mi>β</mi><mspace width="1em"></mspace>`},
		{`\begin{pmatrix} a & b \\ c & d \end{pmatrix}`, `<mrow><mo fence="true" form="prefix" stretchy="true">(</mo><mtable><mtr><mtd><mi>a</mi></mtd><mtd><mi>b</mi></mtd></mtr><mtr><mtd><mi>c</mi></mtd><mtd><mi>d</mi></mtd></mtr></mtable>`},
		{`\begin{cases} 1 & x>0 \\ 0 & \text{else} \end{cases}`, `<mtd class="math-l"><mn>1</mn></mtd>`},
		{`\begin{aligned} a &= b \\ &= c \\ \end{aligned}`, `<mtable displaystyle="true"><mtr><mtd class="math-r"><mi>a</mi></mtd><mtd class="math-l"><mrow><mo>=</mo><mi>b</mi></mrow></mtd></mtr><mtr><mtd class="math-r"></mtd><mtd class="math-l"><mrow><mo>=</mo><mi>c</mi></mrow></mtd></mtr></mtable>`},
		{`\begin{array}{cc} 1 & 2 \end{array}`, "<mtable><mtr><mtd><mn>1</mn></mtd><mtd><mn>2</mn></mtd></mtr></mtable>"},
		{`a &= b \\ c &= d`, `<mtable displaystyle="true"><mtr><mtd class="math-r"><mi>a</mi></mtd>`},
		{`x % a comment } \end
 + 1`, "<mrow><mi>x</mi><mo>+</mo><mn>1</mn></mrow>"},
		{`\underbrace{a+b}_{n}`, `<munder><munder><mrow><mi>a</mi><mo>+</mo><mi>b</mi></mrow><mo stretchy="true">⏟</mo></munder><mi>n</mi></munder>`},
		{`\xrightarrow{f}`, `<mover><mo stretchy="true">→</mo><mi>f</mi></mover>`},
		{`a \pmod{n}`, `<mi>mod</mi>`},
		{`\displaystyle x`, `<mstyle displaystyle="true" scriptlevel="0"><mi>x</mi></mstyle>`},
		{`\color{red} x \textcolor{blue}{y}`, "<mrow><mi>x</mi><mi>y</mi></mrow>"},
		{`\{ x \}`, `<mrow><mo stretchy="false">{</mo><mi>x</mi><mo stretchy="false">}</mo></mrow>`},
		{`a-b*c`, "<mrow><mi>a</mi><mo>−</mo><mi>b</mi><mo>∗</mo><mi>c</mi></mrow>"},
		{`αβ ≤ 2`, "<mrow><mi>α</mi><mi>β</mi><mo>≤</mo><mn>2</mn></mrow>"},
	}
	for _, tc := range tests {
		out, ok := texToMathML(tc.tex, false)
		if !ok {
			t.Errorf("%q: not converted", tc.tex)
			continue
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("%q:\n got %s\nwant %s", tc.tex, out, tc.want)
		}
		if clean := markdownPolicy.Sanitize(out); clean != out {
			t.Errorf("%q: the policy changed the converter's output\n got %s\nfrom %s", tc.tex, clean, out)
		}
	}
	if out, _ := texToMathML("x", true); out != `<math display="block"><mi>x</mi></math>` {
		t.Errorf("display: %s", out)
	}
}

func TestTeXThatCannotBeReadIsNotConverted(t *testing.T) {
	for _, tex := range []string{
		``, "  ", `{x`, `x}`, `\frac{a}`, `x^`, `x^^2`, `x^a^b`, `x_a_b`, `\left( x`, `x \right)`,
		`\begin{matrix} a`, `\begin{matrix} a \end{pmatrix}`, `\end{matrix}`, `a & b }`,
		`\sqrt[3 x`, `\text{abc`, "\xff", `\`, `\left\foo x \right)`,
		strings.Repeat("{", maxMathDepth) + strings.Repeat("}", maxMathDepth),
		strings.Repeat(`\sqrt`, maxMathDepth) + "x",
		strings.Repeat("x", maxMathBytes+1),
	} {
		if out, ok := texToMathML(tex, false); ok {
			t.Errorf("%.40q was converted: %.200s", tex, out)
		}
	}
}

// The converter's output is linear in its input, whatever the input (a
// tie, "~", is the most: 34 bytes; a fence such as "(" 27, an empty
// aligned cell, "&", 26).
func TestTeXToMathMLOutputIsBoundedByItsInput(t *testing.T) {
	for _, tex := range []string{
		strings.Repeat(`\,`, 4000), strings.Repeat(`&`, 4000), strings.Repeat(`\\`, 4000),
		strings.Repeat(`{}`, 4000), strings.Repeat(`'`, 4000), strings.Repeat(`\foo`, 2000),
		strings.Repeat(`x^{y}_{z}`, 1000), strings.Repeat(`\left(\right)`, 600), strings.Repeat(`\not`, 4000) + "=",
		strings.Repeat(`\mathbb{R}`, 1000), strings.Repeat(`\text{<&>}`, 1000), strings.Repeat(`\binom12`, 1000),
		strings.Repeat(`~`, 4000), strings.Repeat(`(`, 4000), strings.Repeat(`\mod`, 1000),
	} {
		out, ok := texToMathML(tex, true)
		if ok && len(out) > 34*len(tex)+64 {
			t.Errorf("%.20q…: %d bytes of MathML for %d of TeX", tex, len(out), len(tex))
		}
	}
}

// benchMathAnswer is a ~4 KB answer of prose with inline and displayed
// math, as a model explaining a derivation writes it.
var benchMathAnswer = func() string {
	var b strings.Builder
	for b.Len() < 3800 {
		b.WriteString("The roots of $ax^2+bx+c=0$ are\n\n$$\nx = \\frac{-b \\pm \\sqrt{b^2-4ac}}{2a}\n$$\n\n")
		b.WriteString("and for $n \\to \\infty$, \\(\\left(1+\\frac{1}{n}\\right)^n \\to e\\); costs stay text: $5 or $10.\n\n")
		b.WriteString("\\[\n\\begin{aligned} (a+b)^2 &= a^2 + 2ab + b^2 \\\\ &= \\sum_{k=0}^{2} \\binom{2}{k} a^k b^{2-k} \\end{aligned}\n\\]\n\n")
	}
	return b.String()
}()

func BenchmarkRenderMarkdownWithMath(b *testing.B) {
	b.SetBytes(int64(len(benchMathAnswer)))
	b.ReportAllocs()
	for b.Loop() {
		RenderMarkdown(benchMathAnswer)
	}
}
