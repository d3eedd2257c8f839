// Command fuzzseeds writes the committed seed corpora of Weft's fuzz targets
// (testdata/fuzz/FuzzXxx/ in Go's corpus format) from the hostile inputs
// defined here, so that the seeds are reproducible and nothing is
// downloaded. Run from the repository root: go run ./internal/fuzzseeds
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	write("views/testdata/fuzz/FuzzRenderMarkdown", markdownSeeds())
	write("chat/testdata/fuzz/FuzzImport", importSeeds())
	write("handlers/testdata/fuzz/FuzzSSE", sseSeeds())
	write("importer/testdata/fuzz/FuzzParse", foreignImportSeeds())
}

// seed is one corpus entry: its values, each a string or []byte.
type seed []any

func write(dir string, seeds []seed) {
	if err := os.RemoveAll(dir); err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	for _, s := range seeds {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, v := range s {
			switch v := v.(type) {
			case string:
				b.WriteString("string(" + strconv.Quote(v) + ")\n")
			case []byte:
				b.WriteString("[]byte(" + strconv.Quote(string(v)) + ")\n")
			default:
				log.Fatalf("seed value of type %T", v)
			}
		}
		sum := sha256.Sum256([]byte(b.String()))
		name := filepath.Join(dir, hex.EncodeToString(sum[:8]))
		if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("%s: %d seeds\n", dir, len(seeds))
}

// markdownSeeds are the constructs that cost goldmark or chroma more than
// linear time (at 16 KB each) and hostile markup.
func markdownSeeds() []seed {
	const n = 16 << 10
	texts := []string{
		strings.Repeat("[a](", n/4),
		strings.Repeat("![a](", n/5),
		strings.Repeat("[", n),
		strings.Repeat("[", n/2) + strings.Repeat("](x)", n/8),
		strings.Repeat("*a", n/2),
		strings.Repeat("*", n),
		strings.Repeat("a_ ", n/3),
		strings.Repeat("*a _b ", n/6),
		strings.Repeat("~~a", n/3),
		strings.Repeat("`a", n/2),
		strings.Repeat("<a", n/2),
		strings.Repeat(">", n),
		strings.Repeat("- ", n/2),
		"|a|b|\n|-|-|\n" + strings.Repeat("|x|y|\n", n/6),
		strings.Repeat("|a", n/4) + "\n" + strings.Repeat("|-", n/4) + "\n",
		"[b]: http://x\n\n" + strings.Repeat("[a][b]", n/6),
		"[a](" + strings.Repeat("(", n),
		"```go\n" + strings.Repeat("a := \"b\" + c /* d */\n", n/22) + "```\n",
		strings.Repeat("```go\nfunc f() { return `x` }\n```\n\n", 64),
		"``` a`b\n" + strings.Repeat("[a](", n/4),
		"```\n" + strings.Repeat("x", n) + "\n~~~\n" + strings.Repeat("[a](", 1024),
		strings.Repeat("> - 1. ", 200) + "deep",
		"<script>alert(1)</script>",
		"[x](javascript:alert(1)) [y](JaVaScRiPt:alert(1)) <javascript:alert(1)>",
		"<div hx-get=\"/logout\" hx-trigger=\"load\" onclick=\"x()\">x</div>",
		"![a](http://evil/x.png) ![b](data:image/png;base64,iVBORw0KGgo=)",
		"```go {style=monokai linenos=table hl_lines=[1]}\nvar x = 1\n```",
		"# h {#x .y onclick=alert(1)}",
		"\xff\xfe<scr\x00ipt>\xc3\x28 [a](\xe2\x82)",
		"x\n\nevent: done\ndata: <b>\r\n\r\nretry: 1",
		strings.Repeat("x\n", (256<<10)/2+1), // past the markdown limit
		// math (views/markdown_math.go)
		"$e^{i\\pi}+1=0$ \\(x_1\\) $$\\frac{a}{b}$$ \\[a=b\\] costs $5 and $10",
		"$$\n\\begin{pmatrix} a & b \\\\ c & d \\end{pmatrix} \\left( \\sum_{i=1}^n \\mathbb{R} \\right)\n$$\n",
		"\\[\n\\begin{cases} 1 & x > 0 \\\\ 0 & \\text{<b>else</b>} \\end{cases}\n\\]",
		strings.Repeat(" $a", n/3) + "b$",
		strings.Repeat(`\[a `, n/4),
		"$$\n" + strings.Repeat("{", n/2) + strings.Repeat("}", n/2) + "\n$$\n",
		"$$\n" + strings.Repeat(`a & b \\ `, n/9) + "\n$$\n",
	}
	out := make([]seed, len(texts))
	for i, t := range texts {
		out[i] = seed{t}
	}
	return out
}

func importSeeds() []seed {
	msg := func(id int, parent, role, content string) string {
		return fmt.Sprintf(`{"id":%d,"parent":%s,"role":%q,"content":%s,"status":"complete"}`, id, parent, role, content)
	}
	file := func(msgs ...string) []byte {
		return []byte(`{"format":"weft-thread","version":1,"title":"t","active_leaf":null,"messages":[` + strings.Join(msgs, ",") + `]}`)
	}
	big := strconv.Quote(strings.Repeat("[a](", 250_000))
	var many []string
	for i := 1; i <= 2000; i++ {
		many = append(many, msg(i, "null", "user", `"x"`))
	}
	return []seed{
		{file(msg(1, "null", "user", `"hi"`), msg(2, "1", "assistant", `"**hello**"`))},
		{file(msg(1, "null", "user", big))},                                                                // 1 M characters
		{file(msg(1, "null", "user", strconv.Quote(strings.Repeat("a", 1_000_001))))},                      // one rune too many
		{file(msg(1, "2", "user", `"a"`), msg(2, "1", "assistant", `"b"`))},                                // parent cycle
		{file(msg(1, "1", "user", `"a"`))},                                                                 // own parent
		{file(msg(1, "null", "user", `"a"`), msg(1, "null", "user", `"b"`))},                               // duplicate id
		{file(msg(1, "null", "wizard", `"a"`))},                                                            // unknown role
		{file(many...)},                                                                                    // a long array
		{[]byte(`{"format":"weft-thread","version":1,"messages":[` + strings.Repeat("[", 100_000) + `]}`)}, // deep nesting
		{[]byte(`{"format":"weft-thread","version":1,"messages":[{"id":1,"role":"user","content":"a","metadata":` +
			strings.Repeat(`{"a":`, 20_000) + "1" + strings.Repeat("}", 20_000) + `}]}`)},
		{[]byte("{\"format\":\"weft-thread\",\"version\":1,\"messages\":[{\"id\":1,\"role\":\"user\",\"content\":\"\xff\xfe\"}]}")}, // invalid UTF-8
		{[]byte(`{"format":"weft-thread","version":1,"messages":[{"id":1,"role":"user","content":"\ud800"}]}`)},                     // lone surrogate
		{[]byte(`{"format":"weft-thread","version":1,"active_leaf":7,"messages":[{"id":1,"role":"user","content":"a"}]}`)},
		{[]byte(`{"format":"weft-thread","version":1,"messages":[{"id":1,"role":"user","content":"a","parts":{"x":1}}]}`)},
		{[]byte(`{"format":"weft-thread","version":2,"messages":[]}`)},
		{[]byte(`[1,2,3]`)},
		{[]byte(``)},
		{[]byte(`{"format":"weft-thread","version":1e400}`)},
	}
}

func sseSeeds() []seed {
	return []seed{
		{"hello", "world"},
		{"a\nb\n", "a\r\nb\rc"},
		{"x\n\nevent: done\ndata: <b>", "\n\n\n"},
		{"\r\n\r\nid: 7\nretry: 1\n", ":comment\n\ndata: forged"},
		{"", ""},
		{"\r", "\n"},
		{strings.Repeat("line\n", 1000), strings.Repeat("\r", 1000)},
		{"\xff\xfe\x00", "data:no-space"},
	}
}

// foreignImportSeeds are ChatGPT and Open WebUI exports: the hand-written
// fixtures and hostile variants of their shapes.
func foreignImportSeeds() []seed {
	var out []seed
	for _, name := range []string{"chatgpt_conversations.json", "openwebui_export.json"} {
		data, err := os.ReadFile(filepath.Join("importer/testdata", name))
		if err != nil {
			log.Fatal(err)
		}
		out = append(out, seed{data})
	}
	msg := func(id, parent, role, text string) string {
		return fmt.Sprintf(`%q:{"id":%q,"parent":%s,"message":{"author":{"role":%q},"content":{"content_type":"text","parts":[%q]}}}`,
			id, id, parent, role, text)
	}
	chain := func(n int) string {
		var b strings.Builder
		b.WriteString(`[{"title":"chain","mapping":{`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			parent := "null"
			if i > 0 {
				parent = strconv.Quote(fmt.Sprint("n", i-1))
			}
			b.WriteString(msg(fmt.Sprint("n", i), parent, []string{"user", "assistant"}[i%2], "m"))
		}
		b.WriteString(`},"current_node":"n` + fmt.Sprint(n-1) + `"}]`)
		return b.String()
	}
	for _, s := range []string{
		`[` + strings.Repeat("[", 10_000),
		`[{"mapping":` + strings.Repeat("[", 5_000) + strings.Repeat("]", 5_000) + `}]`,
		`[{"title":"loop","mapping":{` + msg("a", `"b"`, "user", "x") + "," + msg("b", `"a"`, "assistant", "y") + `},"current_node":"a"}]`,
		`[{"title":"self","mapping":{` + msg("a", `"a"`, "user", "x") + `}}]`,
		`[{"title":"dangling","mapping":{` + msg("a", `"gone"`, "user", "x") + `}}]`,
		`[{"title":5,"mapping":[]},{"title":"t","mapping":{"a":{"message":{"author":{"role":7}}}}}]`,
		`[{"title":"t","chat":{"history":{"messages":{"a":{"id":"a","parentId":"a","role":"user","content":[1,{"type":"image_url"}]}},"currentId":"a"}}}]`,
		`[{"title":"t","chat":{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b","error":{"content":"boom"}}]}}]`,
		"[{\"title\":\"bad \xff\xfe utf-8 \\u0000\",\"mapping\":{" + msg("a", "null", "user", "nul\x00 \xc3") + "}}]",
		`[{"title":"` + strings.Repeat("é", 20_000) + `","mapping":{` + msg("a", "null", "user", strings.Repeat("x", 60_000)) + `}}]`,
		chain(300),
		`[{"title":"t","mapping":{"a":`,
		"\xef\xbb\xbf" + `{"title":"one","mapping":{` + msg("a", "null", "user", "x") + `}}`,
		`[1, "two", null, [], {}]`,
		`[{"mapping":{}} x {"mapping":{}}]`,
	} {
		out = append(out, seed{[]byte(s)})
	}
	return out
}
