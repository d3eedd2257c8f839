package extract

import (
	"context"
	"errors"
	"runtime/metrics"
	"testing"
	"time"
	"weft/internal/hostile"
)

// The fuzz targets run the readers in process under a guard: each input
// must end within guardTime and keep the heap under guardHeap, or the
// process panics naming the limit (a finding, to become a seed and a
// fix). Inputs that take a process down by design of the libraries (an
// xref bomb, a /Prev loop, a decompression bomb) are the jail's to stop:
// their seeds live in FuzzJailReadPDF and FuzzJailThumbnail, which go
// through the jail. Seeds run as ordinary tests; make fuzz fuzzes.
const (
	guardTime = 60 * time.Second
	guardHeap = 1536 << 20
)

// guard runs fn, panicking if it outlasts guardTime or the heap grows
// beyond guardHeap meanwhile.
func guard(t *testing.T, fn func()) {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.Now().Add(guardTime)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				metrics.Read(sample)
				if sample[0].Value.Uint64() > guardHeap {
					panic("extract fuzz: an input grew the heap over the guard")
				}
				if now.After(deadline) {
					panic("extract fuzz: an input ran over the time guard")
				}
			}
		}
	}()
	defer close(done)
	fn()
}

// fuzzLimits keep each input cheap: the readers' limits are part of what
// is tested.
var fuzzLimits = Limits{MaxText: 1 << 20, MaxUnzipped: 64 << 20, MaxPages: 200}

func fuzzRead(f *testing.F, format string, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		guard(t, func() {
			blocks, err := ReadInProcess(context.Background(), format, data, fuzzLimits)
			checkRead(t, blocks, err)
		})
	})
}

// checkRead holds for every answer of a reader: an error is a ReadError
// with a message, and blocks have text.
func checkRead(t *testing.T, blocks []Block, err error) {
	t.Helper()
	if err != nil {
		var re *ReadError
		if !errors.As(err, &re) || re.Msg == "" {
			t.Fatalf("error %v (%T) is no ReadError with a message", err, err)
		}
		return
	}
	for _, b := range blocks {
		if b.Text == "" {
			t.Fatalf("an empty block: %+v", b)
		}
	}
}

func FuzzReadPDF(f *testing.F) {
	fuzzRead(f, FormatPDF, twoPagePDF(), []byte("%PDF-1.4\n%%EOF"))
}

func FuzzReadDOCX(f *testing.F) {
	fuzzRead(f, FormatDOCX, docxFile(f, para("Heading1", "Title")+para("", "Body")))
}

func FuzzReadHTML(f *testing.F) {
	fuzzRead(f, FormatHTML, []byte("<!doctype html><h1>T</h1><p>x<table><tr><td>a</td></tr></table>"),
		[]byte(`<nav>n</nav><div class="toc x"><div>t</div></div><main><article><header><h1>H<a class=headerlink>¶</a></h1></header>`+
			`<aside>a</aside><p>b<div role="navigation">r</div><table><tr><td>c</main><div class=sidebar><script>s</script>`))
}

func FuzzReadMarkdown(f *testing.F) {
	fuzzRead(f, FormatMarkdown, []byte("# T\n\n- a\n- b\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```go\ncode\n```\n"))
}

func FuzzReadCSV(f *testing.F) {
	fuzzRead(f, FormatCSV, []byte("a,b\n1,\"2,3\"\n"))
}

func FuzzReadText(f *testing.F) {
	fuzzRead(f, FormatText, []byte("plain\r\ntext\n\n\nmore"), utf16Bytes("utf16", true, true))
}

func FuzzDetect(f *testing.F) {
	f.Add("a.pdf", twoPagePDF())
	f.Add("a.md", []byte("# x"))
	f.Add("a.docx", docxFile(f, para("", "x")))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		guard(t, func() {
			format, err := Detect(name, data)
			switch {
			case err != nil && !errors.Is(err, ErrUnsupported):
				t.Fatalf("Detect error %v does not wrap ErrUnsupported", err)
			case err == nil && !knownFormat(format):
				t.Fatalf("Detect = %q", format)
			}
		})
	})
}

func FuzzThumbnail(f *testing.F) {
	f.Add(hostile.PNGOf(40, 20))
	f.Add(hostile.JPEGOf(20, 40))
	f.Add(hostile.GIFOf(16, 16))
	f.Add(hostile.WebP1x1())
	f.Fuzz(func(t *testing.T, data []byte) {
		guard(t, func() {
			out, err := ThumbnailInProcess(data, 64)
			var re *ReadError
			switch {
			case err != nil && !errors.As(err, &re):
				t.Fatalf("error %v is no ReadError", err)
			case err == nil && len(out) < 8:
				t.Fatalf("a thumbnail of %d bytes", len(out))
			}
		})
	})
}

// fuzzJail is a jail with short limits, for seeds that end only by them.
var fuzzJail = NewJail(JailConfig{CPU: 2 * time.Second, Timeout: 5 * time.Second, Memory: 512 << 20})

// FuzzJailReadPDF sends PDFs through the jail: whatever they do to the
// reader, the answer is blocks or a ReadError, and this process lives.
func FuzzJailReadPDF(f *testing.F) {
	f.Add(twoPagePDF())
	f.Fuzz(func(t *testing.T, data []byte) {
		blocks, err := fuzzJail.Read(context.Background(), FormatPDF, data, fuzzLimits)
		checkRead(t, blocks, err)
	})
}

// FuzzJailThumbnail sends images through the jail.
func FuzzJailThumbnail(f *testing.F) {
	f.Add(hostile.PNGOf(40, 20))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := fuzzJail.Thumbnail(context.Background(), data, 64)
		var re *ReadError
		switch {
		case err != nil && !errors.As(err, &re):
			t.Fatalf("error %v is no ReadError", err)
		case err == nil && len(out) < 8:
			t.Fatalf("a thumbnail of %d bytes", len(out))
		}
	})
}
