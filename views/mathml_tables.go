package views

import (
	"strings"
	"unicode/utf8"
)

// Fences and tables of mathml.go's converter: \left…\right, environments,
// rows and cells.

// delim reads what follows \left, \right, \middle or \big: "" for ".".
func (p *texParser) delim() string {
	p.skipSpace()
	if p.pos >= len(p.src) {
		p.fail()
		return ""
	}
	var key string
	if p.src[p.pos] == '\\' {
		key = `\` + p.readCmd()
	} else {
		_, n := utf8.DecodeRuneInString(p.src[p.pos:])
		key = p.src[p.pos : p.pos+n]
		p.pos += n
	}
	if key == "." {
		return ""
	}
	d, ok := mathDelims[key]
	if !ok {
		if firstRune(key) >= 0x80 && utf8.RuneCountInString(key) == 1 {
			return key // ⟨ and friends typed as themselves
		}
		p.fail()
	}
	return d
}

// leftRight reads \left D … \right D (the \left is read).
func (p *texParser) leftRight() mnode {
	open := p.delim()
	inner := p.expr(stopRight)
	if p.failed || p.peekCmd() != "right" {
		p.fail()
		return mnode{}
	}
	p.pos += len(`\right`)
	closing := p.delim()
	var b strings.Builder
	b.WriteString("<mrow>")
	if open != "" {
		b.WriteString(`<mo fence="true" form="prefix" stretchy="true">` + escapeMath(open) + "</mo>")
	}
	for _, n := range inner {
		b.WriteString(n.s)
		b.WriteString(n.after)
	}
	if closing != "" {
		b.WriteString(`<mo fence="true" form="postfix" stretchy="true">` + escapeMath(closing) + "</mo>")
	}
	b.WriteString("</mrow>")
	return mnode{s: b.String()}
}

// environment reads \begin{name} … \end{name} (the \begin is read).
func (p *texParser) environment() mnode {
	name := p.rawArg()
	switch strings.TrimSuffix(name, "*") {
	case "array", "subarray", "darray", "alignat", "alignedat":
		p.rawArg() // the column specification or count
	}
	rows := p.table(0)
	if p.failed || p.peekCmd() != "end" {
		p.fail()
		return mnode{}
	}
	p.pos += len(`\end`)
	if p.rawArg() != name {
		p.fail()
		return mnode{}
	}
	fence := func(l, r string) mnode {
		return mnode{s: `<mrow><mo fence="true" form="prefix" stretchy="true">` + l + "</mo>" + mtable(rows, nil) +
			`<mo fence="true" form="postfix" stretchy="true">` + r + "</mo></mrow>"}
	}
	switch strings.TrimSuffix(name, "*") {
	case "pmatrix":
		return fence("(", ")")
	case "bmatrix":
		return fence("[", "]")
	case "Bmatrix":
		return fence("{", "}")
	case "vmatrix":
		return fence("|", "|")
	case "Vmatrix":
		return fence("‖", "‖")
	case "cases", "dcases":
		return mnode{s: `<mrow><mo fence="true" form="prefix" stretchy="true">{</mo>` + mtable(rows, alignLeft) + "</mrow>"}
	case "rcases":
		return mnode{s: "<mrow>" + mtable(rows, alignLeft) + `<mo fence="true" form="postfix" stretchy="true">}</mo></mrow>`}
	case "aligned", "align", "alignat", "alignedat", "split", "eqnarray", "flalign":
		return mnode{s: displayed(mtable(rows, alignPairs))}
	case "equation", "gather", "gathered", "multline":
		if len(rows) == 1 && len(rows[0]) == 1 {
			return mnode{s: orEmpty(rows[0][0])}
		}
		return mnode{s: displayed(mtable(rows, nil))}
	}
	return mnode{s: mtable(rows, nil)}
}

// table reads rows of cells up to \end, a stop in extra, or the end.
func (p *texParser) table(extra int) [][]string {
	var rows [][]string
	var cells []string
	for !p.failed {
		cells = append(cells, row(p.expr(stopCell|extra)))
		p.skipSpace()
		if p.pos < len(p.src) && p.src[p.pos] == '&' {
			p.pos++
			continue
		}
		if cmd := p.peekCmd(); cmd == `\` || cmd == "cr" || cmd == "newline" {
			p.pos += 1 + len(cmd)
			p.skipSpace()
			if p.pos < len(p.src) && p.src[p.pos] == '[' { // \\[2pt]
				if end := strings.IndexByte(p.src[p.pos:], ']'); end >= 0 && end < 16 {
					p.pos += end + 1
				}
			}
			rows = append(rows, cells)
			cells = nil
			continue
		}
		rows = append(rows, cells)
		break
	}
	// A last \\ before \end makes no row.
	if n := len(rows); n > 1 && len(rows[n-1]) == 1 && rows[n-1][0] == emptyRow {
		rows = rows[:n-1]
	}
	return rows
}

// Column alignment of a table: aligned equations alternate right and left
// (the = lines up), cases are left aligned, matrices centred. MathML Core
// has no columnalign; the classes are styled in app.css.
func alignPairs(col int) string {
	if col%2 == 0 {
		return "math-r"
	}
	return "math-l"
}

func alignLeft(int) string { return "math-l" }

// displayed sets a table of equations in display style, as TeX does (MathML
// Core sets table cells in the compact style: ∑ with its limits at the side).
func displayed(table string) string {
	return `<mtable displaystyle="true">` + strings.TrimPrefix(table, "<mtable>")
}

func mtable(rows [][]string, align func(col int) string) string {
	var b strings.Builder
	b.WriteString("<mtable>")
	for _, r := range rows {
		b.WriteString("<mtr>")
		for i, c := range r {
			if align != nil {
				b.WriteString(`<mtd class="` + align(i) + `">`)
			} else {
				b.WriteString("<mtd>")
			}
			if c != emptyRow {
				b.WriteString(c)
			}
			b.WriteString("</mtd>")
		}
		b.WriteString("</mtr>")
	}
	b.WriteString("</mtable>")
	return b.String()
}
