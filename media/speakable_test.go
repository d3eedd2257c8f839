package media

import (
	"strings"
	"testing"
)

func TestSpeakableTextKeepsOnlyWhatReadsAloudWell(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, md, want string
	}{
		{"emphasis and headings lose their marks; headings end as sentences", "# Result\n\nThis is **very** _important_ and ~~old~~.",
			"Result.\n\nThis is very important and old."},
		{"code blocks go, inline code stays as words", "Run `make test` first:\n\n```sh\nmake test\nrm -rf /\n```\n\nThen relax.",
			"Run make test first:\n\nThen relax."},
		{"links keep their words, URLs go", "See [the docs](https://example.com/docs) or https://example.com/raw and <https://auto.example>.",
			"See the docs or and."},
		{"a link whose words are its URL goes", "Source: [https://a.example/x](https://a.example/x)", "Source:"},
		{"list items become sentences", "Steps:\n\n- open it\n- close it!\n1. count", "Steps:\n\nopen it.\n\nclose it!\n\ncount."},
		{"tables become rows of commas", "| Name | Age |\n|---|---|\n| Ann | 31 |\n| Bob |  |",
			"Name, Age.\n\nAnn, 31.\n\nBob."},
		{"HTML, images and rules go", "Hi <b>there</b>.\n\n<div>block</div>\n\n![chart](c.png)\n\n---\n\nBye", "Hi there.\n\nBye."},
		{"escapes and entities read as characters", `Price: 5 \* 3 &amp; more`, "Price: 5 * 3 & more."},
		{"soft line breaks are spaces", "one\ntwo", "one two."},
		{"quotes keep their words", "> Quoted text", "Quoted text."},
		{"nothing speakable gives nothing", "```\ncode\n```", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := SpeakableText(tt.md); got != tt.want {
				t.Errorf("SpeakableText(%q)\n got %q\nwant %q", tt.md, got, tt.want)
			}
		})
	}
}

func TestSpeakableTextReadsOnlyTheBeginningOfAHugeHostileText(t *testing.T) {
	md := "The trip starts in Lisbon.\n\n" + strings.Repeat("[a](", 250_000) + "\n\nENDMARK is never read."
	got := SpeakableText(md)
	if !strings.HasPrefix(got, "The trip starts in Lisbon.") {
		t.Fatalf("the beginning is lost: %.80q", got)
	}
	if strings.Contains(got, "ENDMARK") {
		t.Fatal("the text past the cut was parsed")
	}
	if len(got) > maxSpeakableBytes+1 { // plus the closing full stop
		t.Fatalf("%d bytes spoken from a cut of %d", len(got), maxSpeakableBytes)
	}
}
