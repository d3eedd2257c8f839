package fakeollama

import (
	"math"
	"strings"
	"unicode"
)

// The lexical embedder: deterministic vectors from words and trigrams, so
// that texts sharing words are near each other.

// defaultEmbeddingLength is Model.EmbeddingLength for embedding models that
// do not set it.
const defaultEmbeddingLength = 256

// Feature weights of Vector.
const (
	wordWeight    = 1.0
	trigramWeight = 0.3
)

// Vector returns the deterministic unit-length embedding the fake gives for
// input with a model of embedding length dim (an empty slice when dim <= 0).
//
// It is a lexical embedder that behaves like a weak real embedding model:
// texts sharing words (up to crude stemming) or word fragments get close
// vectors, unrelated texts get nearly orthogonal ones. The input is
// lowercased and split into words (runs of Unicode letters and digits; runs
// of CJK characters give their character bigrams); English stopwords are
// dropped and common suffixes stripped ("running", "runs" and "run" give
// the same word). Each word (weight 1) and each character trigram of the
// word padded with "<" and ">" (weight 0.3) is hashed (FNV-1a, mixed) to a
// bucket in [0, dim) and a sign; the vector is the sum, L2-normalized.
// Input without any word (empty, punctuation, only stopwords) gives a fixed
// unit vector, all components 1/sqrt(dim).
func Vector(input string, dim int) []float32 {
	if dim <= 0 {
		return []float32{}
	}
	acc := make([]float64, dim)
	add := func(kind byte, feature string, w float64) {
		h := featureHash(kind, feature)
		b := int(h % uint64(dim))
		if h>>63 != 0 {
			w = -w
		}
		acc[b] += w
	}
	var grams []string
	for _, word := range words(input) {
		add('w', word.text, wordWeight)
		if word.cjk {
			continue
		}
		grams = trigrams(grams[:0], word.text)
		for _, g := range grams {
			add('g', g, trigramWeight)
		}
	}
	var sum float64
	for _, x := range acc {
		sum += x * x
	}
	v := make([]float32, dim)
	if sum < 1e-12 {
		// No feature (or features that cancelled out exactly).
		x := float32(1 / math.Sqrt(float64(dim)))
		for i := range v {
			v[i] = x
		}
		return v
	}
	n := 1 / math.Sqrt(sum)
	for i, x := range acc {
		v[i] = float32(x * n)
	}
	return v
}

// featureHash is 64-bit FNV-1a of kind, a separator and feature, followed
// by a splitmix64 finalizer so that both the low bits (bucket) and the top
// bit (sign) are well mixed.
func featureHash(kind byte, feature string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	h = (h ^ uint64(kind)) * prime
	h = (h ^ 0) * prime
	for i := 0; i < len(feature); i++ {
		h = (h ^ uint64(feature[i])) * prime
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// trigrams appends the character trigrams of "<" + w + ">" to dst.
func trigrams(dst []string, w string) []string {
	p := "<" + w + ">"
	// Byte offsets of the runes of p, plus len(p).
	var offs [64]int
	idx := offs[:0]
	for i := range p {
		idx = append(idx, i)
	}
	idx = append(idx, len(p))
	for i := 0; i+3 < len(idx); i++ {
		dst = append(dst, p[idx[i]:idx[i+3]])
	}
	return dst
}

type word struct {
	text string
	cjk  bool // a CJK character bigram (or lone character)
}

// words splits s into the embedder's words: lowercased, stopwords dropped,
// stemmed; CJK runs become character bigrams.
func words(s string) []word {
	var out []word
	var cur strings.Builder
	var cjk []rune
	flushWord := func() {
		if cur.Len() == 0 {
			return
		}
		w := cur.String()
		cur.Reset()
		if stopwords[w] {
			return
		}
		out = append(out, word{text: stem(w)})
	}
	flushCJK := func() {
		switch len(cjk) {
		case 0:
			return
		case 1:
			out = append(out, word{text: string(cjk), cjk: true})
		default:
			for i := 0; i+1 < len(cjk); i++ {
				out = append(out, word{text: string(cjk[i : i+2]), cjk: true})
			}
		}
		cjk = cjk[:0]
	}
	for _, r := range s {
		r = unicode.ToLower(r)
		switch {
		case isCJK(r):
			flushWord()
			cjk = append(cjk, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r) || (unicode.Is(unicode.Mn, r) && cur.Len() > 0):
			flushCJK()
			cur.WriteRune(r)
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
	return out
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// stopwords is a small English stopword list (lowercase). Single letters
// left by apostrophes ("don't", "it's") are included.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		a an the and or but if then else nor so than too very
		of to in on at by for with from into onto about as per via
		is are was were be been being am do does did done doing
		have has had having it its itself this that these those there here
		what which who whom whose when where why how
		i me my mine we us our ours you your yours he him his she her hers
		they them their theirs one ones
		not no yes can will would should could may might must shall
		just also all any some each every more most other such only own same
		up down out over under again once between during before after
		above below off until while because both few
		s t d ll m re ve
	`) {
		m[w] = true
	}
	return m
}()

// stem strips common English suffixes from an ASCII word, crudely: enough
// for "running", "runs" and "run", or "baked", "bakes", "baking" and
// "bake", to give the same word. Words of 3 bytes or less, and words with
// digits or non-ASCII letters, are kept as they are.
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	for _, suf := range suffixes {
		base, ok := strings.CutSuffix(w, suf.s)
		if !ok || len(base) < 3 {
			continue
		}
		if suf.s == "s" && strings.ContainsAny(base[len(base)-1:], "siu") {
			// "class", "basis", "bus", "status": not plurals.
			break
		}
		w = base + suf.r
		break
	}
	n := len(w)
	if n > 3 && w[n-1] == w[n-2] && !isVowel(w[n-1]) {
		w = w[:n-1] // runn -> run, stopp -> stop
	}
	n = len(w)
	if n > 3 && w[n-1] == 'e' {
		w = w[:n-1] // bake -> bak, like baking -> bak
	}
	n = len(w)
	if n > 3 && w[n-1] == 'y' {
		w = w[:n-1] + "i" // berry -> berri, like berries -> berri
	}
	return w
}

func isVowel(c byte) bool { return strings.IndexByte("aeiouy", c) >= 0 }

// suffixes are tried in order; the first that leaves a stem of 3 bytes or
// more is stripped and replaced.
var suffixes = []struct{ s, r string }{
	{"ingly", ""},
	{"edly", ""},
	{"ings", ""},
	{"ing", ""},
	{"ies", "y"},
	{"ied", "y"},
	{"ed", ""},
	{"es", ""},
	{"ly", ""},
	{"s", ""},
}
