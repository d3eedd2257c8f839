package views

// The TeX commands mathml.go knows, by what they become. A command not
// listed here (nor handled in mathml.go) is shown as an error box with its
// name, never dropped silently.

// mathSymKind is how a symbol is written.
type mathSymKind byte

const (
	symIdent    mathSymKind = iota // <mi>: letters (Greek), ∞, ∂, ∅ …
	symUpright                     // <mi mathvariant="normal">: upright capital Greek
	symOp                          // <mo>: relations, binary operators, arrows, punctuation
	symBigOp                       // <mo>, limits above and below in display: ∑ ∏ ⋃ …
	symIntegral                    // <mo>, limits at the side: ∫ ∮ …
	symFunc                        // <mi>name</mi> and an invisible function application: sin, log …
	symLimFunc                     // <mo movablelimits>name</mo>, limits below in display: lim, max …
)

type mathSym struct {
	text string
	kind mathSymKind
}

// mathSymbols maps a command name (without the backslash) to its symbol.
var mathSymbols = func() map[string]mathSym {
	m := map[string]mathSym{}
	add := func(kind mathSymKind, pairs ...string) {
		for i := 0; i+1 < len(pairs); i += 2 {
			m[pairs[i]] = mathSym{pairs[i+1], kind}
		}
	}
	add(symIdent,
		"alpha", "α", "beta", "β", "gamma", "γ", "delta", "δ", "epsilon", "ϵ", "varepsilon", "ε",
		"zeta", "ζ", "eta", "η", "theta", "θ", "vartheta", "ϑ", "iota", "ι", "kappa", "κ",
		"varkappa", "ϰ", "lambda", "λ", "mu", "μ", "nu", "ν", "xi", "ξ", "omicron", "ο", "pi", "π",
		"varpi", "ϖ", "rho", "ρ", "varrho", "ϱ", "sigma", "σ", "varsigma", "ς", "tau", "τ",
		"upsilon", "υ", "phi", "ϕ", "varphi", "φ", "chi", "χ", "psi", "ψ", "omega", "ω",
		"digamma", "ϝ",
		"infty", "∞", "partial", "∂", "nabla", "∇", "emptyset", "∅", "varnothing", "∅",
		"hbar", "ℏ", "hslash", "ℏ", "ell", "ℓ", "wp", "℘", "Re", "ℜ", "Im", "ℑ", "aleph", "ℵ",
		"beth", "ℶ", "gimel", "ℷ", "imath", "ı", "jmath", "ȷ", "complement", "∁", "eth", "ð",
		"forall", "∀", "exists", "∃", "nexists", "∄", "neg", "¬", "lnot", "¬", "top", "⊤",
		"bot", "⊥", "angle", "∠", "measuredangle", "∡", "triangle", "△", "square", "□",
		"Box", "□", "blacksquare", "■", "Diamond", "◇", "clubsuit", "♣", "diamondsuit", "♢",
		"heartsuit", "♡", "spadesuit", "♠", "flat", "♭", "natural", "♮", "sharp", "♯",
		"prime", "′", "backprime", "‵", "degree", "°", "checkmark", "✓", "dagger", "†",
		"ddagger", "‡", "S", "§", "P", "¶", "copyright", "©", "pounds", "£", "yen", "¥",
		"euro", "€", "dollar", "$", "mathdollar", "$",
	)
	add(symUpright,
		"Gamma", "Γ", "Delta", "Δ", "Theta", "Θ", "Lambda", "Λ", "Xi", "Ξ", "Pi", "Π",
		"Sigma", "Σ", "Upsilon", "Υ", "Phi", "Φ", "Psi", "Ψ", "Omega", "Ω",
		"varGamma", "Γ", "varDelta", "Δ", "varTheta", "Θ", "varLambda", "Λ", "varXi", "Ξ",
		"varPi", "Π", "varSigma", "Σ", "varUpsilon", "Υ", "varPhi", "Φ", "varPsi", "Ψ", "varOmega", "Ω",
	)
	add(symOp,
		// binary operators
		"pm", "±", "mp", "∓", "times", "×", "div", "÷", "cdot", "⋅", "ast", "∗", "star", "⋆",
		"circ", "∘", "bullet", "∙", "oplus", "⊕", "ominus", "⊖", "otimes", "⊗", "oslash", "⊘",
		"odot", "⊙", "cap", "∩", "cup", "∪", "sqcap", "⊓", "sqcup", "⊔", "uplus", "⊎",
		"vee", "∨", "lor", "∨", "wedge", "∧", "land", "∧", "setminus", "∖", "smallsetminus", "∖",
		"wr", "≀", "diamond", "⋄", "bigtriangleup", "△", "bigtriangledown", "▽",
		"triangleleft", "◁", "triangleright", "▷", "lhd", "⊲", "rhd", "⊳", "unlhd", "⊴", "unrhd", "⊵",
		"amalg", "⨿", "dotplus", "∔", "ltimes", "⋉", "rtimes", "⋊", "centerdot", "⋅", "cdotp", "⋅",
		"boxplus", "⊞", "boxminus", "⊟", "boxtimes", "⊠", "boxdot", "⊡",
		// relations
		"leq", "≤", "le", "≤", "geq", "≥", "ge", "≥", "neq", "≠", "ne", "≠", "equiv", "≡",
		"approx", "≈", "approxeq", "≊", "sim", "∼", "simeq", "≃", "cong", "≅", "ncong", "≇",
		"propto", "∝", "varpropto", "∝", "ll", "≪", "gg", "≫", "lll", "⋘", "ggg", "⋙",
		"leqslant", "⩽", "geqslant", "⩾", "lesssim", "≲", "gtrsim", "≳", "prec", "≺", "succ", "≻",
		"preceq", "⪯", "succeq", "⪰", "subset", "⊂", "supset", "⊃", "subseteq", "⊆", "supseteq", "⊇",
		"subsetneq", "⊊", "supsetneq", "⊋", "nsubseteq", "⊈", "nsupseteq", "⊉",
		"sqsubset", "⊏", "sqsupset", "⊐", "sqsubseteq", "⊑", "sqsupseteq", "⊒",
		"in", "∈", "notin", "∉", "ni", "∋", "owns", "∋", "mid", "∣", "nmid", "∤",
		"parallel", "∥", "nparallel", "∦", "perp", "⊥", "vdash", "⊢", "dashv", "⊣", "models", "⊨",
		"vDash", "⊨", "Vdash", "⊩", "asymp", "≍", "doteq", "≐", "bowtie", "⋈", "smile", "⌣", "frown", "⌢",
		"coloneqq", "≔", "eqqcolon", "≕", "triangleq", "≜", "doteqdot", "≑", "nless", "≮", "ngtr", "≯",
		"nleq", "≰", "ngeq", "≱", "nsim", "≁", "lneq", "⪇", "gneq", "⪈",
		// arrows
		"to", "→", "rightarrow", "→", "leftarrow", "←", "gets", "←", "leftrightarrow", "↔",
		"Rightarrow", "⇒", "Leftarrow", "⇐", "Leftrightarrow", "⇔", "implies", "⟹", "impliedby", "⟸",
		"iff", "⟺", "longrightarrow", "⟶", "longleftarrow", "⟵", "longleftrightarrow", "⟷",
		"Longrightarrow", "⟹", "Longleftarrow", "⟸", "Longleftrightarrow", "⟺", "mapsto", "↦",
		"longmapsto", "⟼", "uparrow", "↑", "downarrow", "↓", "updownarrow", "↕", "Uparrow", "⇑",
		"Downarrow", "⇓", "Updownarrow", "⇕", "nearrow", "↗", "searrow", "↘", "swarrow", "↙",
		"nwarrow", "↖", "hookrightarrow", "↪", "hookleftarrow", "↩", "rightharpoonup", "⇀",
		"rightharpoondown", "⇁", "leftharpoonup", "↼", "leftharpoondown", "↽", "rightleftharpoons", "⇌",
		"leftrightharpoons", "⇋", "rightrightarrows", "⇉", "leftleftarrows", "⇇", "twoheadrightarrow", "↠",
		"rightsquigarrow", "⇝", "leadsto", "⇝", "circlearrowleft", "↺", "circlearrowright", "↻",
		"nrightarrow", "↛", "nleftarrow", "↚", "nRightarrow", "⇏", "nLeftarrow", "⇍", "nLeftrightarrow", "⇎",
		// dots and punctuation
		"ldots", "…", "dots", "…", "dotsc", "…", "dotso", "…", "cdots", "⋯", "dotsb", "⋯", "dotsm", "⋯",
		"dotsi", "⋯", "vdots", "⋮", "ddots", "⋱", "colon", ":", "therefore", "∴", "because", "∵",
		// delimiters used without \left / \right
		"langle", "⟨", "rangle", "⟩", "lvert", "|", "rvert", "|", "vert", "|", "lVert", "‖",
		"rVert", "‖", "Vert", "‖", "lfloor", "⌊", "rfloor", "⌋", "lceil", "⌈", "rceil", "⌉",
		"backslash", "∖", "lbrace", "{", "rbrace", "}", "lbrack", "[", "rbrack", "]",
		"ulcorner", "⌜", "urcorner", "⌝", "llcorner", "⌞", "lrcorner", "⌟",
	)
	add(symBigOp,
		"sum", "∑", "prod", "∏", "coprod", "∐", "bigcup", "⋃", "bigcap", "⋂", "bigvee", "⋁",
		"bigwedge", "⋀", "bigoplus", "⨁", "bigotimes", "⨂", "bigodot", "⨀", "biguplus", "⨄",
		"bigsqcup", "⨆",
	)
	add(symIntegral,
		"int", "∫", "iint", "∬", "iiint", "∭", "iiiint", "⨌", "oint", "∮", "oiint", "∯", "oiiint", "∰",
		"intop", "∫", "smallint", "∫",
	)
	add(symFunc,
		"sin", "sin", "cos", "cos", "tan", "tan", "cot", "cot", "sec", "sec", "csc", "csc",
		"arcsin", "arcsin", "arccos", "arccos", "arctan", "arctan", "sinh", "sinh", "cosh", "cosh",
		"tanh", "tanh", "coth", "coth", "log", "log", "ln", "ln", "lg", "lg", "exp", "exp",
		"arg", "arg", "deg", "deg", "dim", "dim", "hom", "hom", "ker", "ker", "sgn", "sgn",
		"Tr", "Tr", "tr", "tr", "rank", "rank", "span", "span",
	)
	add(symLimFunc,
		"lim", "lim", "liminf", "lim inf", "limsup", "lim sup", "max", "max", "min", "min",
		"sup", "sup", "inf", "inf", "det", "det", "gcd", "gcd", "Pr", "Pr", "argmax", "arg max",
		"argmin", "arg min", "injlim", "inj lim", "projlim", "proj lim",
	)
	return m
}()

// mathDelims are what may follow \left, \right, \middle and \big….
var mathDelims = map[string]string{
	"(": "(", ")": ")", "[": "[", "]": "]", "|": "|", "/": "/", "<": "⟨", ">": "⟩",
	`\{`: "{", `\}`: "}", `\lbrace`: "{", `\rbrace`: "}", `\lbrack`: "[", `\rbrack`: "]",
	`\langle`: "⟨", `\rangle`: "⟩", `\vert`: "|", `\lvert`: "|", `\rvert`: "|",
	`\|`: "‖", `\Vert`: "‖", `\lVert`: "‖", `\rVert`: "‖", `\lfloor`: "⌊", `\rfloor`: "⌋",
	`\lceil`: "⌈", `\rceil`: "⌉", `\backslash`: "∖", `\uparrow`: "↑", `\downarrow`: "↓",
	`\updownarrow`: "↕", `\Uparrow`: "⇑", `\Downarrow`: "⇓", `\ulcorner`: "⌜", `\urcorner`: "⌝",
	`\llcorner`: "⌞", `\lrcorner`: "⌟",
}

// mathAccents are the accents over (or, for the under… ones, under) their
// argument: the mark, and whether it stretches over the whole argument.
var mathAccents = map[string]struct {
	mark    string
	stretch bool
	under   bool
}{
	"hat": {"^", false, false}, "widehat": {"^", true, false}, "check": {"ˇ", false, false},
	"widecheck": {"ˇ", true, false}, "tilde": {"~", false, false}, "widetilde": {"~", true, false},
	"bar": {"‾", false, false}, "overline": {"‾", true, false}, "vec": {"→", false, false},
	"dot": {"˙", false, false}, "ddot": {"¨", false, false}, "dddot": {"⃛", false, false},
	"breve": {"˘", false, false}, "acute": {"´", false, false}, "grave": {"`", false, false},
	"mathring": {"˚", false, false}, "overrightarrow": {"→", true, false},
	"overleftarrow": {"←", true, false}, "overleftrightarrow": {"↔", true, false},
	"underline": {"_", true, true}, "underrightarrow": {"→", true, true},
	"underleftarrow": {"←", true, true}, "underleftrightarrow": {"↔", true, true},
}

// mathSpaces are the spacing commands and their widths in em.
var mathSpaces = map[string]string{
	",": "0.1667em", ":": "0.2222em", ">": "0.2222em", ";": "0.2778em", "!": "-0.1667em",
	" ": "0.3333em", "thinspace": "0.1667em", "medspace": "0.2222em", "thickspace": "0.2778em",
	"negthinspace": "-0.1667em", "negmedspace": "-0.2222em", "negthickspace": "-0.2778em",
	"enspace": "0.5em", "quad": "1em", "qquad": "2em", "space": "0.3333em", "nobreakspace": "0.3333em",
}

// mathFont is an alphabet of Unicode's Mathematical Alphanumeric Symbols
// (MathML Core renders only mathvariant="normal", so \mathbb{R} is written
// as ℝ itself, as Temml and others do).
type mathFont byte

const (
	fontNone mathFont = iota
	fontRoman
	fontBold
	fontItalic
	fontBoldItalic
	fontScript
	fontFraktur
	fontDouble
	fontSans
	fontMono
)

// mathFonts maps the font commands to their alphabet; the switches (\bf …)
// change the rest of their group.
var mathFonts = map[string]mathFont{
	"mathrm": fontRoman, "mathup": fontRoman, "mathnormal": fontNone, "mathbf": fontBold,
	"mathit": fontItalic, "boldsymbol": fontBoldItalic, "bm": fontBoldItalic, "mathbfit": fontBoldItalic,
	"mathcal": fontScript, "mathscr": fontScript, "mathfrak": fontFraktur, "mathbb": fontDouble,
	"mathsf": fontSans, "mathtt": fontMono, "Bbb": fontDouble, "pmb": fontBold,
}

var mathFontSwitches = map[string]mathFont{
	"rm": fontRoman, "bf": fontBold, "it": fontItalic, "cal": fontScript, "sf": fontSans, "tt": fontMono,
}

// mathAlphabets gives, per font, the code points of A, a and 0 (0 when the
// alphabet has no digits) and the letters Unicode encodes elsewhere.
var mathAlphabets = map[mathFont]struct {
	upper, lower, digit rune
	holes               map[rune]rune
}{
	fontBold:       {0x1D400, 0x1D41A, 0x1D7CE, nil},
	fontItalic:     {0x1D434, 0x1D44E, 0, map[rune]rune{'h': 'ℎ'}},
	fontBoldItalic: {0x1D468, 0x1D482, 0x1D7CE, nil},
	fontScript: {0x1D49C, 0x1D4B6, 0, map[rune]rune{'B': 'ℬ', 'E': 'ℰ', 'F': 'ℱ', 'H': 'ℋ', 'I': 'ℐ',
		'L': 'ℒ', 'M': 'ℳ', 'R': 'ℛ', 'e': 'ℯ', 'g': 'ℊ', 'o': 'ℴ'}},
	fontFraktur: {0x1D504, 0x1D51E, 0, map[rune]rune{'C': 'ℭ', 'H': 'ℌ', 'I': 'ℑ', 'R': 'ℜ', 'Z': 'ℨ'}},
	fontDouble: {0x1D538, 0x1D552, 0x1D7D8, map[rune]rune{'C': 'ℂ', 'H': 'ℍ', 'N': 'ℕ', 'P': 'ℙ',
		'Q': 'ℚ', 'R': 'ℝ', 'Z': 'ℤ'}},
	fontSans: {0x1D5A0, 0x1D5BA, 0x1D7E2, nil},
	fontMono: {0x1D670, 0x1D68A, 0x1D7F6, nil},
}

// styled is r in font f (r itself when the alphabet has no such letter).
func styled(f mathFont, r rune) rune {
	a, ok := mathAlphabets[f]
	if !ok {
		return r
	}
	if h, ok := a.holes[r]; ok {
		return h
	}
	switch {
	case r >= 'A' && r <= 'Z':
		return a.upper + r - 'A'
	case r >= 'a' && r <= 'z':
		return a.lower + r - 'a'
	case r >= '0' && r <= '9' && a.digit != 0:
		return a.digit + r - '0'
	}
	return r
}
