package media

import (
	"errors"
	"testing"
)

func TestLimitsCheckSaysWhatIsTooMuchInReadableUnits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		lim   Limits
		files []NamedSize
		want  string // "" when accepted
	}{
		{"ten files within the size limit pass", Limits{}, repeatFiles(10, 8<<20), ""},
		{"no files pass", Limits{}, nil, ""},
		{"a file over 8 MB is named with its size", Limits{}, []NamedSize{{"cv.pdf", 100}, {"photo.png", 9_542_000}},
			"photo.png is 9.1 MB; the limit is 8 MB a file."},
		{"a file one byte over the limit never reads as the limit", Limits{}, []NamedSize{{"a.bin", 8<<20 + 1}},
			"a.bin is 8.1 MB; the limit is 8 MB a file."},
		{"eleven files are too many", Limits{}, repeatFiles(12, 10), "12 files; at most 10 a message."},
		{"limits can be set lower", Limits{MaxFileBytes: 512 << 10, MaxFiles: 2}, []NamedSize{{"notes.txt", 600 << 10}},
			"notes.txt is 600 KB; the limit is 512 KB a file."},
		{"the file count is checked first", Limits{MaxFiles: 1}, []NamedSize{{"a", 1 << 30}, {"b", 1}}, "2 files; at most 1 a message."},
		{"a path in a name is not shown", Limits{MaxFileBytes: 1000}, []NamedSize{{`C:\Users\me\big.txt`, 2000}},
			"big.txt is 2 KB; the limit is 1000 bytes a file."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.lim.Check(tt.files)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Check = %v, want a refusal", err)
			}
			if err.Error() != tt.want {
				t.Errorf("Check = %q, want %q", err.Error(), tt.want)
			}
		})
	}
}

func TestReadableSizesRoundUp(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0 bytes", 1: "1 byte", 1023: "1023 bytes", 1024: "1 KB", 1536: "1.5 KB", 1025: "1.1 KB",
		8 << 20: "8 MB", 9_542_000: "9.1 MB", 50 << 20: "50 MB",
	} {
		if got := readableSize(n); got != want {
			t.Errorf("readableSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func repeatFiles(n int, size int64) []NamedSize {
	files := make([]NamedSize, n)
	for i := range files {
		files[i] = NamedSize{Name: "f", Size: size}
	}
	return files
}
