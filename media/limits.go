package media

import "fmt"

// Default attachment limits.
const (
	DefaultMaxFileBytes = 8 << 20
	DefaultMaxFiles     = 10
)

// Limits bound what one message may carry; zero fields take the defaults.
type Limits struct {
	MaxFileBytes int64 // per file (default 8 MiB)
	MaxFiles     int   // per message (default 10)
}

// NamedSize is a file as the limits see it.
type NamedSize struct {
	Name string
	Size int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}

// Check refuses a message with too many files, or with a file over the size
// limit (the first one found), in words for the user: "photo.png is 9.1 MB;
// the limit is 8 MB a file", "12 files; at most 10 a message". The error
// wraps ErrRefused.
func (l Limits) Check(files []NamedSize) error {
	l = l.withDefaults()
	if len(files) > l.MaxFiles {
		return refuse(nil, "%d files; at most %d a message.", len(files), l.MaxFiles)
	}
	for _, f := range files {
		if f.Size > l.MaxFileBytes {
			return refuse(nil, "%s is %s; the limit is %s a file.", displayName(f.Name), readableSize(f.Size), readableSize(l.MaxFileBytes))
		}
	}
	return nil
}

// String describes the limits for a composer hint: "up to 10 files of 8 MB".
func (l Limits) String() string {
	l = l.withDefaults()
	return fmt.Sprintf("up to %d files of %s", l.MaxFiles, readableSize(l.MaxFileBytes))
}
