package extract

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"weft/internal/hostile"
	"weft/internal/testwait"
)

func init() {
	// Operations only this test binary's children know.
	childOps["selfkill"] = func([]byte, []string) ([]byte, error) {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	childOps["probe"] = func(_ []byte, args []string) ([]byte, error) {
		var out []string
		if f, err := os.Open("/etc/passwd"); err == nil {
			f.Close()
			out = append(out, "opened /etc/passwd")
		}
		if f, err := os.CreateTemp("", "escape"); err == nil {
			f.Close()
			out = append(out, "created "+f.Name())
		}
		if c, err := net.DialTimeout("tcp", args[0], 2*time.Second); err == nil {
			c.Close()
			out = append(out, "connected to "+args[0])
		}
		return []byte(strings.Join(out, "; ")), nil
	}
}

func TestAnXrefBombThroughTheJailIsAMemoryErrorAndThisProcessSurvives(t *testing.T) {
	t.Parallel()
	bomb := hostile.XrefBomb()
	if len(bomb) > 140 {
		t.Fatalf("the bomb is %d bytes; it should be about 130", len(bomb))
	}
	start := time.Now()
	_, err := NewJail(JailConfig{}).Read(context.Background(), FormatPDF, bomb, Limits{})
	var re *ReadError
	if !errors.As(err, &re) || !errors.Is(err, ErrJailMemory) {
		t.Fatalf("Read = %v, want a ReadError for memory", err)
	}
	if want := "This PDF could not be read: it needs more memory than Weft allows for one file."; re.Msg != want {
		t.Errorf("message %q, want %q", re.Msg, want)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("it took %v", d)
	}
}

func TestAChildThatSpinsEndsAsTooLongAtItsCPULimit(t *testing.T) {
	t.Parallel()
	j := NewJail(JailConfig{CPU: 1 * time.Second, Timeout: 30 * time.Second})
	start := time.Now()
	_, err := j.run(context.Background(), "This PDF", nil, "spin")
	if !errors.Is(err, ErrJailTimeout) {
		t.Fatalf("run = %v, want a timeout", err)
	}
	if want := "This PDF could not be read: it took too long to read."; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if d := time.Since(start); d > 25*time.Second {
		t.Errorf("it took %v, the CPU limit did not end it", d)
	}
}

func TestAPrevLoopIsRefusedAsDamagedBeforeTheLibraryFollowsIt(t *testing.T) {
	t.Parallel()
	_, err := NewJail(JailConfig{}).Read(context.Background(), FormatPDF, hostile.PrevLoop(), Limits{})
	var re *ReadError
	if !errors.As(err, &re) || errors.Is(err, ErrJailTimeout) || !strings.Contains(re.Msg, "point back at each other") {
		t.Fatalf("Read = %v, want the damaged-chain refusal", err)
	}
	if xrefChainLoops(twoPagePDF()) {
		t.Error("a PDF with one cross-reference section counts as a loop")
	}
}

func TestAWallClockTimeoutKillsAChildThatWaits(t *testing.T) {
	t.Parallel()
	j := NewJail(JailConfig{Timeout: 500 * time.Millisecond})
	start := time.Now()
	_, err := j.run(context.Background(), "This file", nil, "sleep")
	if !errors.Is(err, ErrJailTimeout) {
		t.Fatalf("run = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("it took %v", d)
	}
}

func init() {
	childOps["spin"] = func([]byte, []string) ([]byte, error) {
		for n := 0; ; n++ { // a child looping on the CPU, as a reader on a hostile file may
			if n < 0 {
				return nil, nil
			}
		}
	}
	childOps["sleep"] = func([]byte, []string) ([]byte, error) {
		time.Sleep(time.Hour) // a child blocked, using no CPU: the behaviour under test, not a wait
		return nil, nil
	}
}

func TestAChildKilledByASignalIsACrashForThatFileOnly(t *testing.T) {
	t.Parallel()
	j := NewJail(JailConfig{})
	_, err := j.run(context.Background(), "This PDF", nil, "selfkill")
	if !errors.Is(err, ErrJailCrashed) {
		t.Fatalf("run = %v, want a crash", err)
	}
	if want := "This PDF could not be read: it made the reader crash."; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	blocks, err := j.Read(context.Background(), FormatText, []byte("still reading"), Limits{})
	if err != nil || len(blocks) != 1 || blocks[0].Text != "still reading" {
		t.Errorf("the next read = %+v, %v", blocks, err)
	}
}

func TestTheChildCanNeitherOpenFilesNorConnect(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := os.ReadFile("/etc/passwd"); err != nil {
		t.Fatalf("this process cannot read /etc/passwd either: %v", err)
	}
	out, err := NewJail(JailConfig{}).run(context.Background(), "This file", nil, "probe", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > 0 {
		t.Errorf("the child escaped: %s", out)
	}
}

func TestTheJailRunsAtMostWorkersChildrenAtOnce(t *testing.T) {
	t.Parallel()
	const workers = 2
	j := NewJail(JailConfig{Workers: workers})
	release := make(chan struct{})
	var mu sync.Mutex
	alive, most := 0, 0
	j.started = func() {
		mu.Lock()
		alive = j.Running()
		most = max(most, alive)
		mu.Unlock()
		<-release
	}
	errs := make(chan error, workers+1)
	for i := range workers + 1 {
		go func() {
			_, err := j.Read(context.Background(), FormatText, fmt.Appendf(nil, "file %d", i), Limits{})
			errs <- err
		}()
	}
	// Wait until every call is either in a child or waiting for a slot.
	if !testwait.Until(20*time.Second, func() bool { return j.Running()+int(j.waiting.Load()) >= workers+1 }) {
		t.Fatalf("running %d, waiting %d", j.Running(), j.waiting.Load())
	}
	if got := j.Running(); got != workers {
		t.Errorf("%d children alive, want %d", got, workers)
	}
	if got := j.waiting.Load(); got != 1 {
		t.Errorf("%d calls waiting, want 1", got)
	}
	close(release)
	for range workers + 1 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if most > workers {
		t.Errorf("%d children were alive at once, want at most %d", most, workers)
	}
}

func TestTheJailReadsWhatTheReadersRead(t *testing.T) {
	t.Parallel()
	j := NewJail(JailConfig{})
	pdf := twoPagePDF()
	want, err := ReadInProcess(context.Background(), FormatPDF, pdf, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := j.Read(context.Background(), FormatPDF, pdf, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	assertBlocks(t, got, want)
	_, err = j.Read(context.Background(), FormatDOCX, hostile.ZipBomb(2<<20), Limits{MaxUnzipped: 1 << 20})
	var re *ReadError
	if !errors.As(err, &re) || !errors.Is(err, ErrTooLarge) || !strings.Contains(re.Msg, "zip bomb") {
		t.Errorf("a zip bomb = %v, want the reader's refusal for size", err)
	}
	if _, err := j.Read(context.Background(), "xlsx", []byte("x"), Limits{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("an unknown format = %v", err)
	}
	thumb, err := j.Thumbnail(context.Background(), hostile.PNGOf(600, 300), 100)
	if err != nil || len(thumb) < 8 || string(thumb[1:4]) != "PNG" {
		t.Errorf("Thumbnail = %d bytes, %v", len(thumb), err)
	}
}
