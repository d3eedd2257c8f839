package views

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// TeX math to MathML Core, on the server, so that answers show formulas
// without any script (the CSP allows none inline, and a math library in
// the browser would be the largest file Weft serves).
//
// No Go module that does this is served by the module proxy Weft uses
// (treeblood, goldmark-treeblood, goldmark-mathml and goldmark-mathjax were
// refused), and the ones that exist elsewhere run KaTeX or Temml in a
// JavaScript engine. So this is a small converter of our own, for the TeX
// that models write: the symbols, fonts, accents, fractions, roots,
// scripts, \left…\right, \text and the matrix, cases and align
// environments. It is a recursive descent over the source that writes
// MathML as it goes:
//
//   - no macros (\def, \newcommand) and no expansion: every command writes
//     a bounded amount of markup for the source it consumes, so the output
//     is linear in the input;
//   - nesting (groups, arguments, environments, \left…\right, switches)
//     is capped at maxMathDepth; deeper input is not converted;
//   - input it cannot read (unbalanced braces, \end without \begin, a
//     missing argument) is not converted: the caller shows the source;
//   - an unknown command becomes <merror> with its name, so nothing a
//     model wrote disappears silently;
//   - only the elements and attributes of markdownPolicy's MathML part are
//     written, and all text is escaped.

const (
	// maxMathDepth caps nesting (a group costs two levels, a command one);
	// TeX written by people and models rarely nests ten groups deep.
	maxMathDepth = 48
	// maxMathBytes caps one expression; a longer one is shown as source.
	maxMathBytes = 16 << 10
)

// texToMathML converts one TeX math expression to a <math> element (a
// block when display is set). ok is false when the expression cannot be
// read; the caller then shows its source.
func texToMathML(tex string, display bool) (out string, ok bool) {
	if len(tex) > maxMathBytes || !utf8.ValidString(tex) || strings.TrimSpace(tex) == "" {
		return "", false
	}
	p := &texParser{src: tex}
	body := p.top()
	if p.failed {
		return "", false
	}
	if display {
		return `<math display="block">` + body + `</math>`, true
	}
	return `<math>` + body + `</math>`, true
}

// texParser reads one expression. failed is sticky: once set, every
// function returns at once and the result is discarded.
type texParser struct {
	src    string
	pos    int
	depth  int
	font   mathFont
	failed bool
}

// mnode is the MathML of one atom.
type mnode struct {
	s string
	// limits: scripts go below and above (∑, lim, \underbrace, \limits).
	limits bool
	// after follows the atom once its scripts are attached (the invisible
	// function application after sin).
	after string
}

// What ends an expression besides the end of the source.
const (
	stopGroup   = 1 << iota // }
	stopBracket             // ] (the index of \sqrt[…])
	stopCell                // & \\ \cr \end
	stopRight               // \right
)

const emptyRow = "<mrow></mrow>"

func (p *texParser) fail() { p.failed = true }

// enter counts one level of nesting; false (and failed) past the cap.
func (p *texParser) enter() bool {
	p.depth++
	if p.depth > maxMathDepth {
		p.fail()
	}
	return !p.failed
}

func (p *texParser) leave() { p.depth-- }

// top reads the whole source: rows and cells (a & or \\ outside an
// environment, as models write for aligned equations) or one expression.
func (p *texParser) top() string {
	rows := p.table(0)
	if p.pos < len(p.src) {
		p.fail() // a stray \end or }
	}
	if p.failed {
		return ""
	}
	if len(rows) == 1 && len(rows[0]) == 1 {
		return orEmpty(rows[0][0])
	}
	return displayed(mtable(rows, alignPairs))
}

// skipSpace skips white space and % comments.
func (p *texParser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		case '%':
			if i := strings.IndexByte(p.src[p.pos:], '\n'); i >= 0 {
				p.pos += i + 1
			} else {
				p.pos = len(p.src)
			}
		default:
			return
		}
	}
}

// peekCmd is the name of the command at pos ("" when there is none).
func (p *texParser) peekCmd() string {
	if p.pos >= len(p.src) || p.src[p.pos] != '\\' {
		return ""
	}
	i := p.pos + 1
	for i < len(p.src) && isASCIILetter(p.src[i]) {
		i++
	}
	if i > p.pos+1 {
		return p.src[p.pos+1 : i]
	}
	if i < len(p.src) {
		_, n := utf8.DecodeRuneInString(p.src[i:])
		return p.src[i : i+n]
	}
	return ""
}

// readCmd consumes the command at pos and returns its name.
func (p *texParser) readCmd() string {
	name := p.peekCmd()
	if name == "" {
		p.fail()
		return ""
	}
	p.pos += 1 + len(name)
	return name
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func (p *texParser) atStop(stops int) bool {
	c := p.src[p.pos]
	switch {
	case stops&stopGroup != 0 && c == '}', stops&stopBracket != 0 && c == ']', stops&stopCell != 0 && c == '&':
		return true
	case c != '\\':
		return false
	}
	switch p.peekCmd() {
	case `\`, "cr", "newline", "end":
		return stops&stopCell != 0
	case "right":
		return stops&stopRight != 0
	}
	return false
}

// expr reads atoms until a stop.
func (p *texParser) expr(stops int) []mnode {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	var out []mnode
	for !p.failed {
		p.skipSpace()
		if p.pos >= len(p.src) || p.atStop(stops) {
			return out
		}
		if p.src[p.pos] == '}' || p.src[p.pos] == '&' {
			p.fail() // unbalanced, or a cell outside a table
			return nil
		}
		cmd := p.peekCmd()
		switch cmd {
		case "over", "atop", "choose":
			p.pos += 1 + len(cmd)
			num, den := row(out), row(p.expr(stops))
			switch cmd {
			case "over":
				return []mnode{{s: "<mfrac>" + num + den + "</mfrac>"}}
			case "atop":
				return []mnode{{s: `<mfrac linethickness="0">` + num + den + "</mfrac>"}}
			}
			return []mnode{{s: binom(num, den)}}
		case "displaystyle", "textstyle", "scriptstyle", "scriptscriptstyle":
			p.pos += 1 + len(cmd)
			style := map[string]string{
				"displaystyle": `displaystyle="true" scriptlevel="0"`, "textstyle": `displaystyle="false" scriptlevel="0"`,
				"scriptstyle": `displaystyle="false" scriptlevel="1"`, "scriptscriptstyle": `displaystyle="false" scriptlevel="2"`,
			}[cmd]
			return append(out, mnode{s: "<mstyle " + style + ">" + row(p.expr(stops)) + "</mstyle>"})
		}
		if f, ok := mathFontSwitches[cmd]; ok {
			p.pos += 1 + len(cmd)
			saved := p.font
			p.font = f
			rest := p.expr(stops)
			p.font = saved
			return append(out, rest...)
		}
		out = append(out, p.term())
	}
	return nil
}

// row is the MathML of a list of atoms: one element (an mrow around
// several).
func row(nodes []mnode) string {
	var b strings.Builder
	n := 0
	for _, x := range nodes {
		if x.s != "" {
			n++
		}
		if x.after != "" {
			n++
		}
	}
	if n != 1 {
		b.WriteString("<mrow>")
	}
	for _, x := range nodes {
		b.WriteString(x.s)
		b.WriteString(x.after)
	}
	if n != 1 {
		b.WriteString("</mrow>")
	}
	return b.String()
}

func orEmpty(s string) string {
	if s == "" {
		return emptyRow
	}
	return s
}

// term is an atom with its sub- and superscripts and primes.
func (p *texParser) term() mnode {
	base := p.atom()
	var sub, sup string
	primes := 0
scripts:
	for !p.failed {
		p.skipSpace()
		if p.pos >= len(p.src) {
			break
		}
		c := p.src[p.pos]
		switch {
		case c == '^' || c == '_':
			// A second superscript (x^a^b) is an error in TeX too; wrapping
			// again would copy the base once per script (quadratic).
			if (c == '^' && sup != "") || (c == '_' && sub != "") {
				p.fail()
				return mnode{}
			}
			p.pos++
			a := orEmpty(p.arg().s)
			if c == '^' {
				sup = a
			} else {
				sub = a
			}
			continue
		case c == '\'':
			p.pos++
			primes++
			continue
		}
		switch p.peekCmd() {
		case "limits":
			p.pos += len(`\limits`)
			base.limits = true
			continue
		case "nolimits":
			p.pos += len(`\nolimits`)
			base.limits = false
			continue
		}
		break scripts
	}
	sup = withPrimes(sup, primes)
	if sub == "" && sup == "" {
		return base
	}
	return mnode{s: scripted(base, sub, sup), after: base.after}
}

func withPrimes(sup string, primes int) string {
	if primes == 0 {
		return sup
	}
	marks := strings.Repeat("′", primes%4) + strings.Repeat("⁗", primes/4)
	if sup == "" {
		return "<mo>" + marks + "</mo>"
	}
	return "<mrow><mo>" + marks + "</mo>" + sup + "</mrow>"
}

// scripted attaches sub and sup (either may be "") to base.
func scripted(base mnode, sub, sup string) string {
	b := orEmpty(base.s)
	under, over, both := "msub", "msup", "msubsup"
	if base.limits {
		under, over, both = "munder", "mover", "munderover"
	}
	switch {
	case sub != "" && sup != "":
		return "<" + both + ">" + b + sub + sup + "</" + both + ">"
	case sub != "":
		return "<" + under + ">" + b + sub + "</" + under + ">"
	case sup != "":
		return "<" + over + ">" + b + sup + "</" + over + ">"
	}
	return b
}

// arg reads a command's argument or a script: a group, a command, or one
// character.
func (p *texParser) arg() mnode {
	p.skipSpace()
	if p.pos >= len(p.src) {
		p.fail()
		return mnode{}
	}
	switch p.src[p.pos] {
	case '{', '\\':
		return p.atom()
	case '}', '^', '_', '&':
		p.fail()
		return mnode{}
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return p.runeNode(r)
}

// atom reads one group, command, number, letter or symbol.
func (p *texParser) atom() mnode {
	if !p.enter() {
		return mnode{}
	}
	defer p.leave()
	p.skipSpace()
	if p.pos >= len(p.src) {
		p.fail()
		return mnode{}
	}
	c := p.src[p.pos]
	switch {
	case c == '{':
		p.pos++
		inner := p.expr(stopGroup)
		if p.pos >= len(p.src) || p.src[p.pos] != '}' {
			p.fail()
			return mnode{}
		}
		p.pos++
		return mnode{s: orEmpty(row(inner))}
	case c == '^' || c == '_' || c == '\'':
		return mnode{s: emptyRow} // a script with nothing before it
	case c == '\\':
		return p.command()
	case c >= '0' && c <= '9' || c == '.' && p.pos+1 < len(p.src) && isDigit(p.src[p.pos+1]):
		start := p.pos
		for p.pos < len(p.src) && (isDigit(p.src[p.pos]) || p.src[p.pos] == '.' && p.pos+1 < len(p.src) && isDigit(p.src[p.pos+1])) {
			p.pos++
		}
		var b strings.Builder
		for _, r := range p.src[start:p.pos] {
			b.WriteRune(styled(p.font, r))
		}
		return mnode{s: "<mn>" + b.String() + "</mn>"}
	case isASCIILetter(c) && p.font == fontRoman:
		// \mathrm{max}: one upright identifier.
		start := p.pos
		for p.pos < len(p.src) && isASCIILetter(p.src[p.pos]) {
			p.pos++
		}
		if p.pos-start == 1 {
			return mnode{s: `<mi mathvariant="normal">` + p.src[start:p.pos] + "</mi>"}
		}
		return mnode{s: "<mi>" + p.src[start:p.pos] + "</mi>"}
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return p.runeNode(r)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// asciiOps are the characters written as operators, and what as.
var asciiOps = map[rune]string{
	'-': "−", '*': "∗", '<': "&lt;", '>': "&gt;", '&': "&amp;", '"': "&quot;",
}

// fences are the characters that TeX does not stretch unless asked to.
const fences = "()[]{}|/‖⟨⟩⌊⌋⌈⌉"

// runeNode is one character.
func (p *texParser) runeNode(r rune) mnode {
	switch {
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		return mnode{}
	case r == '~':
		return mnode{s: mspace("0.3333em")}
	case r >= '0' && r <= '9':
		return mnode{s: "<mn>" + string(styled(p.font, r)) + "</mn>"}
	case r < 0x80 && isASCIILetter(byte(r)):
		if p.font == fontRoman {
			return mnode{s: `<mi mathvariant="normal">` + string(r) + "</mi>"}
		}
		return mnode{s: "<mi>" + string(styled(p.font, r)) + "</mi>"}
	case unicode.IsLetter(r):
		return mnode{s: "<mi>" + string(r) + "</mi>"}
	case unicode.IsDigit(r):
		return mnode{s: "<mn>" + string(r) + "</mn>"}
	}
	return mnode{s: mo(string(r))}
}

// mo is an operator; the fence characters do not stretch.
func mo(text string) string {
	if s, ok := asciiOps[firstRune(text)]; ok && utf8.RuneCountInString(text) == 1 {
		text = s
	} else {
		text = escapeMath(text)
	}
	if strings.Contains(fences, text) && text != "" {
		return `<mo stretchy="false">` + text + "</mo>"
	}
	return "<mo>" + text + "</mo>"
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

func mspace(width string) string { return `<mspace width="` + width + `"></mspace>` }

func binom(top, bottom string) string {
	return `<mrow><mo>(</mo><mfrac linethickness="0">` + top + bottom + `</mfrac><mo>)</mo></mrow>`
}

// escapeMath escapes text for an element's content and drops control
// characters.
func escapeMath(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
