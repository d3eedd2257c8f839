package views

import (
	"strings"
	"unicode/utf8"
)

// The commands of mathml.go's converter: what each one writes.

// command reads a command and its arguments.
func (p *texParser) command() mnode {
	name := p.readCmd()
	if p.failed {
		return mnode{}
	}
	if n, ok := p.structure(name); ok {
		return n
	}
	if n, ok := p.decoration(name); ok {
		return n
	}
	if sym, ok := mathSymbols[name]; ok {
		return symbolNode(sym)
	}
	if f, ok := mathFonts[name]; ok {
		saved := p.font
		p.font = f
		a := p.arg()
		p.font = saved
		return a
	}
	if a, ok := mathAccents[name]; ok {
		base := orEmpty(p.arg().s)
		stretch := "false"
		if a.stretch {
			stretch = "true"
		}
		mark := `<mo stretchy="` + stretch + `">` + escapeMath(a.mark) + "</mo>"
		if a.under {
			return mnode{s: `<munder accentunder="true">` + base + mark + "</munder>"}
		}
		return mnode{s: `<mover accent="true">` + base + mark + "</mover>"}
	}
	if w, ok := mathSpaces[name]; ok {
		return mnode{s: mspace(w)}
	}
	if _, ok := mathFontSwitches[name]; ok {
		return mnode{} // a switch where an argument was expected (x^\bf y)
	}
	if len(name) == 1 && !isASCIILetter(name[0]) {
		// \{ \} \$ \% \# \& \_ \| …: the character itself.
		if name == "|" {
			return mnode{s: mo("‖")}
		}
		if name == `\` {
			return mnode{} // a line break inside a group
		}
		return p.runeNode(firstRune(name))
	}
	return mnode{s: "<merror><mtext>\\" + escapeMath(name) + "</mtext></merror>"}
}

// symbolNode writes a symbol of mathSymbols.
func symbolNode(sym mathSym) mnode {
	t := escapeMath(sym.text)
	switch sym.kind {
	case symIdent:
		return mnode{s: "<mi>" + t + "</mi>"}
	case symUpright:
		return mnode{s: `<mi mathvariant="normal">` + t + "</mi>"}
	case symBigOp:
		return mnode{s: `<mo movablelimits="true">` + t + "</mo>", limits: true}
	case symIntegral:
		return mnode{s: "<mo>" + t + "</mo>"}
	case symFunc:
		return mnode{s: "<mi>" + t + "</mi>", after: "<mo>\u2061</mo>"}
	case symLimFunc:
		return mnode{s: `<mo form="prefix" movablelimits="true">` + t + "</mo>", limits: true}
	}
	return mnode{s: mo(sym.text)}
}

// structure handles the commands that build structure: fractions, roots,
// fences, environments, text, operator names.
func (p *texParser) structure(name string) (mnode, bool) {
	switch name {
	case "frac", "dfrac", "tfrac", "cfrac":
		num := orEmpty(p.arg().s)
		den := orEmpty(p.arg().s)
		s := "<mfrac>" + num + den + "</mfrac>"
		switch name {
		case "dfrac", "cfrac":
			s = `<mstyle displaystyle="true" scriptlevel="0">` + s + "</mstyle>"
		case "tfrac":
			s = `<mstyle displaystyle="false" scriptlevel="0">` + s + "</mstyle>"
		}
		return mnode{s: s}, true
	case "binom", "dbinom", "tbinom":
		top := orEmpty(p.arg().s)
		return mnode{s: binom(top, orEmpty(p.arg().s))}, true
	case "sqrt":
		p.skipSpace()
		if p.pos < len(p.src) && p.src[p.pos] == '[' {
			p.pos++
			index := row(p.expr(stopBracket))
			if p.pos >= len(p.src) || p.src[p.pos] != ']' {
				p.fail()
				return mnode{}, true
			}
			p.pos++
			return mnode{s: "<mroot>" + orEmpty(p.arg().s) + orEmpty(index) + "</mroot>"}, true
		}
		return mnode{s: "<msqrt>" + p.arg().s + "</msqrt>"}, true
	case "left":
		return p.leftRight(), true
	case "right", "end":
		p.fail() // without its \left or \begin
		return mnode{}, true
	case "middle":
		return mnode{s: `<mo stretchy="true">` + escapeMath(p.delim()) + "</mo>"}, true
	case "big", "Big", "bigg", "Bigg", "bigl", "Bigl", "biggl", "Biggl", "bigr", "Bigr", "biggr", "Biggr",
		"bigm", "Bigm", "biggm", "Biggm":
		size := map[byte]string{'b': "1.2em", 'B': "1.8em"}[name[0]]
		if strings.HasPrefix(strings.ToLower(name), "bigg") {
			size = map[byte]string{'b': "2.4em", 'B': "3em"}[name[0]]
		}
		d := p.delim()
		if d == "" {
			return mnode{}, true
		}
		return mnode{s: `<mo stretchy="true" minsize="` + size + `" maxsize="` + size + `">` + escapeMath(d) + "</mo>"}, true
	case "begin":
		return p.environment(), true
	case "text", "textrm", "textnormal", "textup", "textmd", "textbf", "textit", "textsl", "textsf", "texttt",
		"emph", "mbox", "hbox", "fbox", "textsc":
		return mnode{s: "<mtext>" + escapeMath(texText(p.rawArg())) + "</mtext>"}, true
	case "operatorname":
		star := p.pos < len(p.src) && p.src[p.pos] == '*'
		if star {
			p.pos++
		}
		op := escapeMath(strings.TrimSpace(texText(p.rawArg())))
		if star {
			return mnode{s: `<mo form="prefix" movablelimits="true">` + op + "</mo>", limits: true}, true
		}
		return mnode{s: "<mi>" + op + "</mi>", after: "<mo>\u2061</mo>"}, true
	case "substack":
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != '{' {
			p.fail()
			return mnode{}, true
		}
		p.pos++
		rows := p.table(stopGroup)
		if p.pos >= len(p.src) || p.src[p.pos] != '}' {
			p.fail()
			return mnode{}, true
		}
		p.pos++
		return mnode{s: mtable(rows, nil)}, true
	}
	return mnode{}, false
}

// decoration handles the commands that decorate, space or annotate their
// argument.
func (p *texParser) decoration(name string) (mnode, bool) {
	switch name {
	case "mathop":
		a := p.arg()
		a.limits = true
		return a, true
	case "mathbin", "mathrel", "mathord", "mathopen", "mathclose", "mathpunct", "mathinner", "smash",
		"boxed", "cancel", "bcancel", "xcancel", "sout", "displaylines", "mathstrut":
		if name == "mathstrut" {
			return mnode{}, true
		}
		return p.arg(), true
	case "phantom", "hphantom", "vphantom":
		return mnode{s: "<mphantom>" + orEmpty(p.arg().s) + "</mphantom>"}, true
	case "color":
		p.rawArg()
		return mnode{}, true
	case "textcolor", "colorbox":
		p.rawArg()
		if name == "colorbox" {
			return mnode{s: "<mtext>" + escapeMath(texText(p.rawArg())) + "</mtext>"}, true
		}
		return p.arg(), true
	case "label", "tag", "eqref", "ref", "hspace", "vspace", "kern", "mkern", "hskip", "mskip", "mspace":
		p.skipStar()
		p.skipSpace()
		if p.pos < len(p.src) && p.src[p.pos] == '{' {
			p.rawArg()
		} else {
			p.skipDimension()
		}
		if strings.Contains(name, "space") || strings.Contains(name, "skip") || strings.Contains(name, "kern") {
			return mnode{s: mspace("0.2778em")}, true
		}
		return mnode{}, true
	case "nonumber", "notag", "limits", "nolimits", "displaylimits", "allowbreak", "nobreak", "relax":
		return mnode{}, true
	case "not":
		a := p.arg().s
		if strings.HasSuffix(a, "</mo>") {
			return mnode{s: a[:len(a)-len("</mo>")] + "\u0338</mo>"}, true
		}
		return mnode{s: a}, true
	case "stackrel", "overset", "underset":
		mark := orEmpty(p.arg().s)
		base := orEmpty(p.arg().s)
		if name == "underset" {
			return mnode{s: "<munder>" + base + mark + "</munder>"}, true
		}
		return mnode{s: "<mover>" + base + mark + "</mover>"}, true
	case "overbrace", "underbrace":
		a := orEmpty(p.arg().s)
		if name == "overbrace" {
			return mnode{s: `<mover>` + a + `<mo stretchy="true">⏞</mo></mover>`, limits: true}, true
		}
		return mnode{s: `<munder>` + a + `<mo stretchy="true">⏟</mo></munder>`, limits: true}, true
	case "xrightarrow", "xleftarrow", "xRightarrow", "xLeftarrow", "xleftrightarrow", "xLeftrightarrow", "xmapsto":
		arrow := map[string]string{"xrightarrow": "→", "xleftarrow": "←", "xRightarrow": "⇒", "xLeftarrow": "⇐",
			"xleftrightarrow": "↔", "xLeftrightarrow": "⇔", "xmapsto": "↦"}[name]
		below := ""
		p.skipSpace()
		if p.pos < len(p.src) && p.src[p.pos] == '[' {
			p.pos++
			below = row(p.expr(stopBracket))
			if p.pos >= len(p.src) || p.src[p.pos] != ']' {
				p.fail()
				return mnode{}, true
			}
			p.pos++
		}
		above := orEmpty(p.arg().s)
		op := `<mo stretchy="true">` + arrow + "</mo>"
		if below != "" {
			return mnode{s: "<munderover>" + op + below + above + "</munderover>"}, true
		}
		return mnode{s: "<mover>" + op + above + "</mover>"}, true
	case "pmod":
		a := orEmpty(p.arg().s)
		return mnode{s: "<mrow>" + mspace("1em") + mo("(") + "<mi>mod</mi>" + mspace("0.3333em") + a + mo(")") + "</mrow>"}, true
	case "bmod":
		return mnode{s: "<mo>mod</mo>"}, true
	case "mod":
		return mnode{s: "<mrow>" + mspace("1em") + "<mi>mod</mi>" + mspace("0.3333em") + "</mrow>"}, true
	}
	return mnode{}, false
}

func (p *texParser) skipStar() {
	if p.pos < len(p.src) && p.src[p.pos] == '*' {
		p.pos++
	}
}

// skipDimension skips a length such as "-3mu" or "2pt".
func (p *texParser) skipDimension() {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if !(isDigit(c) || c == '.' || c == '-' || c == '+' || isASCIILetter(c)) {
			return
		}
		p.pos++
	}
}

// rawArg is the source of an argument: the inside of a group, a command
// name with its backslash, or one character.
func (p *texParser) rawArg() string {
	p.skipSpace()
	if p.pos >= len(p.src) {
		p.fail()
		return ""
	}
	switch p.src[p.pos] {
	case '{':
		depth := 0
		for i := p.pos; i < len(p.src); i++ {
			switch p.src[i] {
			case '\\':
				i++ // \{ and \} do not count
			case '{':
				depth++
			case '}':
				depth--
				if depth == 0 {
					s := p.src[p.pos+1 : i]
					p.pos = i + 1
					return s
				}
			}
		}
		p.fail()
		return ""
	case '\\':
		start := p.pos
		p.readCmd()
		return p.src[start:p.pos]
	}
	_, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return p.src[p.pos-n : p.pos]
}

// texText is the text of a \text argument: escaped characters unescaped,
// ~ a no-break space.
func texText(s string) string {
	if !strings.ContainsAny(s, `\~{}`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '~':
			b.WriteString("\u00a0")
		case c == '{' || c == '}':
		case c == '\\' && i+1 < len(s) && !isASCIILetter(s[i+1]):
			i++
			if s[i] == '\\' {
				b.WriteByte(' ')
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
