package extract

import (
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// pdfText extracts the text of pages by interpreting their content streams
// with pdf.Interpret, tracking the text and graphics state well enough to
// know where each string lands: a move to another line becomes a line
// break, a gap on the same line a space.
type pdfText struct {
	r       *reader
	fonts   map[string]*pdfFont // by the font dictionary's printed form
	damaged int                 // pages that failed part-way

	// per page
	out     strings.Builder
	runes   int
	content int64 // decompressed content bytes still allowed
	forms   int   // form XObjects drawn
	ops     int
	have    bool // something was placed
	line    []placed
	lastY   float64
	lastEnd float64
	lastSz  float64
}

// ligatures are spelled out so that search finds "specification" in a
// PDF that typeset it with the "fi" ligature.
var ligatures = strings.NewReplacer("\ufb00", "ff", "\ufb01", "fi", "\ufb02", "fl", "\ufb03", "ffi", "\ufb04", "ffl", "\ufb05", "st", "\ufb06", "st")

// placed is a string shown on the current line, where it starts.
type placed struct {
	x float64
	s string
}

// pdfStop carries an error out of pdf.Interpret (a panic is the only way).
type pdfStop struct{ err error }

type matrix [6]float64 // a b c d e f

var identity = matrix{1, 0, 0, 1, 0, 0}

func (m matrix) mul(n matrix) matrix {
	return matrix{
		m[0]*n[0] + m[1]*n[2], m[0]*n[1] + m[1]*n[3],
		m[2]*n[0] + m[3]*n[2], m[2]*n[1] + m[3]*n[3],
		m[4]*n[0] + m[5]*n[2] + n[4], m[4]*n[1] + m[5]*n[3] + n[5],
	}
}

func translate(x, y float64) matrix { return matrix{1, 0, 0, 1, x, y} }

// gstate is the part of the graphics state that text placement needs.
type gstate struct {
	ctm                 matrix
	font                *pdfFont
	size, cs, ws, scale float64 // Tf size, Tc, Tw, Tz/100
	leading             float64 // TL
}

// page returns the text of one page. A page that breaks part-way keeps
// the text read before the break.
func (t *pdfText) page(page pdf.Value) (text string, err error) {
	t.out.Reset()
	t.runes, t.content, t.forms, t.have, t.line = 0, pdfMaxContent, 0, false, t.line[:0]
	defer func() {
		if x := recover(); x != nil {
			if stop, ok := x.(pdfStop); ok {
				text, err = "", stop.err
				return
			}
			t.damaged++
			text, err = t.out.String(), nil
		}
	}()
	t.run(page.Key("Contents"), inherited(page, "Resources"), gstate{ctm: identity, scale: 1}, 0)
	return t.out.String(), nil
}

// run interprets one content stream (or array of streams) with its
// resources; depth counts nested forms.
func (t *pdfText) run(strm, res pdf.Value, g gstate, depth int) {
	if k := strm.Kind(); k != pdf.Stream && k != pdf.Array {
		return
	}
	if t.content -= streamSize(strm, t.content); t.content < 0 {
		return // too big to interpret safely: this part of the page is left out
	}
	fonts := map[string]*pdfFont{}
	var saved []gstate
	tm, tlm := identity, identity

	show := func(raw string) {
		f := g.font
		if f == nil {
			f = t.font(pdf.Value{})
		}
		trm := tm.mul(g.ctm)
		size := g.size * math.Hypot(trm[2], trm[3])
		var adv float64
		f.codes(raw, func(code int) {
			w := f.width(code)*f.unit*g.size + g.cs
			if code == ' ' && !f.cid {
				w += g.ws
			}
			adv += w * g.scale
		})
		tm = translate(adv, 0).mul(tm)
		t.place(trm[4], trm[5], tm.mul(g.ctm)[4], size, f.enc.Decode(raw))
	}
	nextLine := func() {
		tlm = translate(0, -g.leading).mul(tlm)
		tm = tlm
	}

	pdf.Interpret(strm, func(stk *pdf.Stack, op string) {
		if t.ops++; t.ops%1024 == 0 {
			if err := t.r.ctx.Err(); err != nil {
				panic(pdfStop{err})
			}
		}
		args := make([]pdf.Value, stk.Len())
		for i := len(args) - 1; i >= 0; i-- {
			args[i] = stk.Pop()
		}
		num := func(i int) float64 {
			if i < len(args) {
				return args[i].Float64()
			}
			return 0
		}
		mat := func() matrix { return matrix{num(0), num(1), num(2), num(3), num(4), num(5)} }
		switch op {
		case "q":
			if len(saved) < 256 {
				saved = append(saved, g)
			}
		case "Q":
			if n := len(saved); n > 0 {
				g, saved = saved[n-1], saved[:n-1]
			}
		case "cm":
			g.ctm = mat().mul(g.ctm)
		case "BT":
			tm, tlm = identity, identity
		case "Tf":
			if len(args) == 2 {
				name := args[0].Name()
				if _, ok := fonts[name]; !ok {
					fonts[name] = t.font(res.Key("Font").Key(name))
				}
				g.font, g.size = fonts[name], num(1)
			}
		case "Tc":
			g.cs = num(0)
		case "Tw":
			g.ws = num(0)
		case "Tz":
			g.scale = num(0) / 100
		case "TL":
			g.leading = num(0)
		case "Td", "TD":
			if op == "TD" {
				g.leading = -num(1)
			}
			tlm = translate(num(0), num(1)).mul(tlm)
			tm = tlm
		case "Tm":
			tm, tlm = mat(), mat()
		case "T*":
			nextLine()
		case "Tj", "'", "\"":
			if op == "\"" && len(args) == 3 {
				g.ws, g.cs = num(0), num(1)
			}
			if op != "Tj" {
				nextLine()
			}
			if len(args) > 0 {
				show(args[len(args)-1].RawString())
			}
		case "TJ":
			if len(args) == 1 {
				for i := 0; i < args[0].Len(); i++ {
					if x := args[0].Index(i); x.Kind() == pdf.String {
						show(x.RawString())
					} else {
						tm = translate(-x.Float64()/1000*g.size*g.scale, 0).mul(tm)
					}
				}
			}
		case "Do":
			if len(args) == 1 && depth < 4 && t.forms < 256 {
				form := res.Key("XObject").Key(args[0].Name())
				if form.Key("Subtype").Name() == "Form" {
					t.forms++
					inner := g
					if m := form.Key("Matrix"); m.Len() == 6 {
						inner.ctm = matrix{m.Index(0).Float64(), m.Index(1).Float64(), m.Index(2).Float64(),
							m.Index(3).Float64(), m.Index(4).Float64(), m.Index(5).Float64()}.mul(g.ctm)
					}
					formRes := form.Key("Resources")
					if formRes.IsNull() {
						formRes = res
					}
					t.run(form, formRes, inner, depth+1)
				}
			}
		}
	})
}

// place appends a shown string at device position (x, y), ending at endX,
// with a line break or a space before it when its position says so.
func (t *pdfText) place(x, y, endX, size float64, s string) {
	if s == "" {
		return
	}
	if t.have {
		lh := max(size, t.lastSz, 1)
		dy := math.Abs(y - t.lastY)
		if dy < 0.3*lh {
			for _, p := range t.line {
				if p.s == s && math.Abs(p.x-x) < 0.3*lh {
					return // the same text again on the same spot: a fake bold
				}
			}
		}
		prev, _ := utf8.DecodeLastRuneInString(t.out.String())
		first, _ := utf8.DecodeRuneInString(s)
		blank := prev == ' ' || prev == '\n' || first == ' '
		if dy > 0.5*lh {
			t.line = t.line[:0]
		}
		switch {
		case dy > 1.6*lh:
			t.out.WriteString("\n\n")
		case dy > 0.5*lh:
			t.out.WriteString("\n")
		case !blank && (x > t.lastEnd+0.15*lh || x < t.lastEnd-lh):
			t.out.WriteString(" ")
		}
	}
	t.out.WriteString(ligatures.Replace(s))
	t.have, t.lastY, t.lastEnd, t.lastSz = true, y, endX, size
	if len(t.line) < 512 {
		t.line = append(t.line, placed{x, s})
	}
	if t.runes += utf8.RuneCountInString(s); t.r.runes+t.runes > t.r.lim.MaxText {
		panic(pdfStop{t.r.count(t.runes)})
	}
}

// pdfFont is what text extraction needs from a font: the decoding of its
// codes into text and their widths.
type pdfFont struct {
	enc     pdf.TextEncoding
	unit    float64 // glyph space to text space: 1/1000 but for Type3 fonts
	cid     bool    // two-byte codes (a Type0 font)
	first   int
	widths  []float64
	missing float64
	ranges  []cidWidth // Type0: sorted by lo
	dw      float64
}

type cidWidth struct {
	lo, hi int
	w      float64
}

// latin1 decodes codes as Latin-1, for fonts whose encoding is unusable.
type latin1 struct{}

func (latin1) Decode(raw string) string {
	r := make([]rune, len(raw))
	for i := range len(raw) {
		r[i] = rune(raw[i])
	}
	return string(r)
}

// font returns the (cached) font for a font dictionary.
func (t *pdfText) font(v pdf.Value) *pdfFont {
	key := v.String()
	if f, ok := t.fonts[key]; ok {
		return f
	}
	f := &pdfFont{enc: latin1{}, unit: 0.001, missing: 500, dw: 1000}
	t.fonts[key] = f
	if v.IsNull() {
		return f
	}
	// A huge ToUnicode map would be interpreted without bounds.
	if tu := v.Key("ToUnicode"); tu.Kind() != pdf.Stream || streamSize(tu, 4<<20) <= 4<<20 {
		func() {
			defer func() { _ = recover() }() // a broken map leaves Latin-1
			f.enc = (&pdf.Font{V: v}).Encoder()
		}()
	}
	if v.Key("Subtype").Name() == "Type0" {
		f.cid = true
		desc := v.Key("DescendantFonts").Index(0)
		if dw := desc.Key("DW"); !dw.IsNull() {
			f.dw = dw.Float64()
		}
		f.ranges = cidWidths(desc.Key("W"))
		return f
	}
	if m := v.Key("FontMatrix").Index(0).Float64(); v.Key("Subtype").Name() == "Type3" && m > 0 && m < 1 {
		f.unit = m
	}
	f.first = int(v.Key("FirstChar").Int64())
	w := v.Key("Widths")
	for i := 0; i < w.Len() && i < 1<<16; i++ {
		f.widths = append(f.widths, w.Index(i).Float64())
	}
	if len(f.widths) > 0 {
		f.missing = 0 // the spec's default once widths are given
	}
	if mw := v.Key("FontDescriptor").Key("MissingWidth"); !mw.IsNull() {
		f.missing = mw.Float64()
	}
	return f
}

// cidWidths reads a CIDFont's W array: "c [w1 w2 …]" and "c1 c2 w" entries.
func cidWidths(w pdf.Value) []cidWidth {
	var out []cidWidth
	for i := 0; i+1 < w.Len() && len(out) < 1<<16; {
		lo := int(w.Index(i).Int64())
		if next := w.Index(i + 1); next.Kind() == pdf.Array {
			for j := 0; j < next.Len() && j < 1<<16; j++ {
				out = append(out, cidWidth{lo + j, lo + j, next.Index(j).Float64()})
			}
			i += 2
			continue
		}
		if i+2 >= w.Len() {
			break
		}
		out = append(out, cidWidth{lo, int(w.Index(i + 1).Int64()), w.Index(i + 2).Float64()})
		i += 3
	}
	sort.Slice(out, func(a, b int) bool { return out[a].lo < out[b].lo })
	return out
}

// codes calls fn with every character code of a shown string.
func (f *pdfFont) codes(raw string, fn func(int)) {
	if !f.cid {
		for i := range len(raw) {
			fn(int(raw[i]))
		}
		return
	}
	for i := 0; i+1 < len(raw); i += 2 {
		fn(int(raw[i])<<8 | int(raw[i+1]))
	}
}

// width is a code's advance in glyph space (thousandths of the font size
// but for Type3 fonts).
func (f *pdfFont) width(code int) float64 {
	if f.cid {
		i := sort.Search(len(f.ranges), func(i int) bool { return f.ranges[i].lo > code }) - 1
		if i >= 0 && code <= f.ranges[i].hi {
			return f.ranges[i].w
		}
		return f.dw
	}
	if i := code - f.first; i >= 0 && i < len(f.widths) {
		return f.widths[i]
	}
	if len(f.widths) == 0 && code == ' ' { // a standard font without widths: a guess
		return 250
	}
	return f.missing
}
