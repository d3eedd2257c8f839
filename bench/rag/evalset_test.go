package main

import (
	"strings"
	"testing"
)

// newQuestion builds a question of the tiny corpus with its split by the rule.
func newQuestion(id, page, answer string) pyQuestion {
	return pyQuestion{ID: id, Question: "how?", Page: page, Answer: answer, Paraphrase: true, Split: splitOf(id)}
}

// tinyCorpus is three pages as readPages returns them.
var tinyCorpus = map[string]string{
	"a.html": normSpace("Temporary files are destroyed as soon as they are closed.\nBoth pages share this exact sentence of seven words."),
	"b.html": normSpace("A counter is a dict subclass for counting things.\nBoth pages share this exact sentence of seven words."),
	"c.html": normSpace("Nothing   to   see on this page of the tiny corpus."),
}

func failsFor(fails []string, id string) []string {
	var out []string
	for _, f := range fails {
		if strings.HasPrefix(f, id+":") {
			out = append(out, f)
		}
	}
	return out
}

func TestCheckSetRefusesAnAnswerThatOccursInTwoPages(t *testing.T) {
	fails := checkSet([]pyQuestion{newQuestion("q1", "a.html", "Both pages share this exact sentence")}, tinyCorpus)
	got := failsFor(fails, "q1")
	if len(got) != 1 || !strings.Contains(got[0], "also occurs in b.html") {
		t.Fatalf("failures %q, want one naming b.html", got)
	}
}

func TestCheckSetRefusesAnAnswerThatOccursInNoPage(t *testing.T) {
	fails := checkSet([]pyQuestion{newQuestion("q1", "a.html", "files are deleted when they are closed")}, tinyCorpus)
	got := failsFor(fails, "q1")
	if len(got) != 1 || !strings.Contains(got[0], "occurs 0 times in a.html") {
		t.Fatalf("failures %q, want one saying it occurs 0 times", got)
	}
}

func TestCheckSetAcceptsAnAnswerOnceInItsPageWhateverTheWhiteSpace(t *testing.T) {
	qs := []pyQuestion{
		newQuestion("q1", "a.html", "destroyed as soon\n as they are   closed"),
		newQuestion("q2", "b.html", "a dict subclass for counting things"),
	}
	qs[0].Split, qs[1].Split = "dev", "heldout" // one per part, whatever the rule says
	fails := checkSet(qs, tinyCorpus)
	for _, id := range []string{"q1", "q2"} {
		for _, f := range failsFor(fails, id) {
			if !strings.Contains(f, "split") {
				t.Errorf("unexpected failure %q", f)
			}
		}
	}
}

func TestCheckSetRefusesAnAnswerOfTooFewOrTooManyWords(t *testing.T) {
	qs := []pyQuestion{
		newQuestion("q1", "c.html", "Nothing to see"),
		newQuestion("q2", "c.html", strings.Repeat("word ", 16)),
	}
	fails := checkSet(qs, tinyCorpus)
	for _, id := range []string{"q1", "q2"} {
		if got := strings.Join(failsFor(fails, id), "; "); !strings.Contains(got, "words (5–15)") {
			t.Errorf("%s: failures %q, want a word count failure", id, got)
		}
	}
}

func TestCheckSetRefusesAThirdQuestionOnAPageAndAMissingPage(t *testing.T) {
	qs := []pyQuestion{
		newQuestion("q1", "c.html", "Nothing to see on this page"),
		newQuestion("q2", "c.html", "to see on this page of"),
		newQuestion("q3", "c.html", "see on this page of the tiny"),
		newQuestion("q4", "gone.html", "see on this page of the tiny"),
	}
	fails := strings.Join(checkSet(qs, tinyCorpus), "\n")
	for _, want := range []string{"q3: a third question on c.html", "q4: target page gone.html is not in the subset"} {
		if !strings.Contains(fails, want) {
			t.Errorf("failures\n%s\nlack %q", fails, want)
		}
	}
}

func TestCheckSetRefusesASplitAgainstTheRuleAndTooFewParaphrases(t *testing.T) {
	q := newQuestion("q1", "a.html", "destroyed as soon as they are closed")
	q.Split = map[string]string{"dev": "heldout", "heldout": "dev"}[q.Split]
	q.Paraphrase = false
	fails := strings.Join(checkSet([]pyQuestion{q}, tinyCorpus), "\n")
	for _, want := range []string{"the rule gives", "only 0 of 1 questions are paraphrases"} {
		if !strings.Contains(fails, want) {
			t.Errorf("failures\n%s\nlack %q", fails, want)
		}
	}
}

func TestHitRankCountsOnlyTheTargetPageAndAPhraseHalfCutByABoundary(t *testing.T) {
	answer := "It will be destroyed as soon as it is closed, including an implicit close"
	docs := []string{"other.html", "t.html", "t.html"}
	texts := []string{answer, "nothing here", "the end of a chunk: It will be destroyed as soon as it is closed"}
	if got := hitRank(docs, texts, "t.html", answer); got != 3 {
		t.Errorf("rank %d, want 3 (the other page's chunk does not count; the cut half does)", got)
	}
	if got := hitRank(docs[:2], texts[:2], "t.html", answer); got != 0 {
		t.Errorf("rank %d, want 0", got)
	}
}
