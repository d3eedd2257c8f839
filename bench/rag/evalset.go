package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"weft/extract"
)

// pyQuestion is one question of the second evaluation set
// (rag/testdata/eval-python): its one target page, relative to the corpus
// root, and an answer phrase that occurs once in that page and in no other
// page of the set's subset.
type pyQuestion struct {
	ID         string `json:"id"`
	Question   string `json:"question"`
	Page       string `json:"page"`
	Answer     string `json:"answer"`
	Paraphrase bool   `json:"paraphrase"` // the question avoids the page's wording
	Split      string `json:"split"`      // "dev" or "heldout", see splitOf
}

// evalSet is the question file and the subset of pages it is asked over.
type evalSet struct {
	Root      string   // corpus root (the Debian package's html directory)
	Pages     []string // relative paths, from pages.txt
	Questions []pyQuestion
}

// splitOf is the rule that assigns a question to the dev or held-out part:
// the parity of the first byte of the SHA-256 of its id. Written in the
// file too, so that the file reads on its own; the check refuses a split
// that does not follow the rule.
func splitOf(id string) string {
	if sum := sha256.Sum256([]byte(id)); sum[0]%2 == 0 {
		return "dev"
	}
	return "heldout"
}

// loadEvalSet reads questions.json and pages.txt of dir; the pages are
// under root.
func loadEvalSet(dir, root string) (*evalSet, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "questions.json"))
	if err != nil {
		return nil, err
	}
	s := &evalSet{Root: root}
	if err := json.Unmarshal(raw, &s.Questions); err != nil {
		return nil, fmt.Errorf("questions.json: %w", err)
	}
	list, err := os.ReadFile(filepath.Join(dir, "pages.txt"))
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(list), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			s.Pages = append(s.Pages, l)
		}
	}
	return s, nil
}

// readPages reads every page of the subset through Weft's own HTML reader
// (the one ingestion runs in its jail), so that "occurs in the page" means
// in what Weft indexes, and returns each page's white-space-normalised
// text. A missing page is no error here: the check reports it.
func readPages(ctx context.Context, s *evalSet) (map[string]string, error) {
	texts := make(map[string]string, len(s.Pages))
	for _, p := range s.Pages {
		data, err := os.ReadFile(filepath.Join(s.Root, p))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		blocks, err := extract.Read(ctx, extract.FormatHTML, data, extract.Limits{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		parts := make([]string, len(blocks))
		for i, b := range blocks {
			parts[i] = b.Text
		}
		texts[p] = normSpace(strings.Join(parts, "\n"))
	}
	return texts, nil
}

func normSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// checkSet verifies the rules of the set against the pages' texts and
// returns one line per failure (none: the set is sound): every target page
// is in the subset and was read; the answer has 5–15 words and occurs
// exactly once in its page and in no other page; at most two questions per
// page; ids are unique; the split follows splitOf and each part holds
// 40–60% of the questions; at least half the questions are paraphrases.
func checkSet(qs []pyQuestion, texts map[string]string) []string {
	var fails []string
	bad := func(q pyQuestion, f string, a ...any) {
		fails = append(fails, fmt.Sprintf("%s: %s", q.ID, fmt.Sprintf(f, a...)))
	}
	pages := make([]string, 0, len(texts))
	for p := range texts {
		pages = append(pages, p)
	}
	sort.Strings(pages)
	perPage, ids, parts := map[string]int{}, map[string]bool{}, map[string]int{}
	paraphrased := 0
	for _, q := range qs {
		if ids[q.ID] {
			bad(q, "duplicate id")
		}
		ids[q.ID] = true
		if strings.TrimSpace(q.Question) == "" {
			bad(q, "no question")
		}
		if q.Paraphrase {
			paraphrased++
		}
		if want := splitOf(q.ID); q.Split != want {
			bad(q, "split %q, the rule gives %q", q.Split, want)
		}
		parts[q.Split]++
		if perPage[q.Page]++; perPage[q.Page] == 3 {
			bad(q, "a third question on %s", q.Page)
		}
		answer := normSpace(q.Answer)
		if n := len(strings.Fields(answer)); n < 5 || n > 15 {
			bad(q, "answer has %d words (5–15)", n)
		}
		text, ok := texts[q.Page]
		if !ok {
			bad(q, "target page %s is not in the subset or could not be read", q.Page)
			continue
		}
		if n := strings.Count(text, answer); n != 1 {
			bad(q, "answer occurs %d times in %s", n, q.Page)
		}
		for _, p := range pages {
			if p != q.Page && strings.Contains(texts[p], answer) {
				bad(q, "answer also occurs in %s", p)
			}
		}
	}
	n := len(qs)
	for _, part := range []string{"dev", "heldout"} {
		if c := parts[part]; c*10 < n*4 || c*10 > n*6 {
			fails = append(fails, fmt.Sprintf("split: %d of %d questions are %s (40–60%%)", c, n, part))
		}
	}
	if paraphrased*2 < n {
		fails = append(fails, fmt.Sprintf("only %d of %d questions are paraphrases (at least half)", paraphrased, n))
	}
	return fails
}

// checkEval is -mode check-eval: it prints the failures of the set and
// returns an error when there is one.
func checkEval(ctx context.Context, w interface{ Write([]byte) (int, error) }, dir, root string, minQuestions int) error {
	s, err := loadEvalSet(dir, root)
	if err != nil {
		return err
	}
	texts, err := readPages(ctx, s)
	if err != nil {
		return err
	}
	fails := checkSet(s.Questions, texts)
	if len(s.Questions) < minQuestions {
		fails = append(fails, fmt.Sprintf("%d questions, at least %d wanted", len(s.Questions), minQuestions))
	}
	for _, p := range s.Pages {
		if _, ok := texts[p]; !ok {
			fails = append(fails, fmt.Sprintf("page %s is missing under %s", p, root))
		}
	}
	dev := 0
	for _, q := range s.Questions {
		if q.Split == "dev" {
			dev++
		}
	}
	fmt.Fprintf(w, "%d questions (%d dev, %d heldout) over %d pages: %d failures\n",
		len(s.Questions), dev, len(s.Questions)-dev, len(s.Pages), len(fails))
	for _, f := range fails {
		fmt.Fprintln(w, "  "+f)
	}
	if len(fails) > 0 {
		return fmt.Errorf("the evaluation set %s fails %d checks", dir, len(fails))
	}
	return nil
}
