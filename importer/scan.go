package importer

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"weft/internal/usererr"
)

// Scanner reads an export one conversation at a time: the elements of its
// top-level JSON list (or the one object it is), each as raw bytes, without
// ever holding more than one conversation (at most MaxConversationBytes).
// A conversation too large or nested too deep is passed over (a *SkipError
// from Next) and the scan goes on; a file that is not a list, or ends in the
// middle of one, stops it (*BrokenError).
type Scanner struct {
	br       *bufio.Reader
	maxBytes int
	maxDepth int
	discard  bool // count only: keep no bytes
	started  bool
	single   bool // the file is one object, not a list
	done     bool
	pos      int // elements returned so far
	buf      []byte
}

// BrokenError is a file that cannot be read on; its message is for the
// user.
type BrokenError struct{ Reason string }

func (e *BrokenError) Error() string { return e.Reason }

func broken(format string, args ...any) error {
	return &BrokenError{Reason: fmt.Sprintf(format, args...)}
}

// NewScanner reads r under lim (WithDefaults applied).
func NewScanner(r io.Reader, lim Limits) *Scanner {
	lim = lim.WithDefaults()
	return &Scanner{br: bufio.NewReaderSize(r, 64<<10), maxBytes: lim.MaxConversationBytes, maxDepth: lim.MaxDepth}
}

// Count reads the whole file and returns how many conversations it holds,
// or a *BrokenError when its structure is broken (nothing has been
// imported yet then).
func Count(r io.Reader, lim Limits) (int, error) {
	s := NewScanner(r, lim)
	s.discard = true
	for {
		_, err := s.Next()
		var se *SkipError
		switch {
		case err == io.EOF:
			return s.pos, nil
		case err == nil, errors.As(err, &se):
		default:
			return s.pos, err
		}
	}
}

// Position is the number of elements Next returned (or passed over).
func (s *Scanner) Position() int { return s.pos }

// Next returns the next conversation's JSON; a *SkipError for one passed
// over (the scan can go on); io.EOF at the end; any other error ends the
// scan.
func (s *Scanner) Next() ([]byte, error) {
	if s.done {
		return nil, io.EOF
	}
	c, err := s.nonSpace()
	if err != nil {
		return nil, s.eof(err)
	}
	if !s.started {
		s.started = true
		if c == 0xEF { // a UTF-8 byte order mark
			if b, _ := s.br.Peek(2); len(b) == 2 && b[0] == 0xBB && b[1] == 0xBF {
				_, _ = s.br.Discard(2)
				if c, err = s.nonSpace(); err != nil {
					return nil, s.eof(err)
				}
			}
		}
		switch c {
		case '[':
			if c, err = s.nonSpace(); err != nil {
				return nil, s.eof(err)
			}
			if c == ']' {
				s.done = true
				return nil, io.EOF
			}
		case '{':
			s.single = true
		default:
			s.done = true
			return nil, broken("the file is not a JSON list of conversations")
		}
	} else if s.single {
		s.done = true
		return nil, io.EOF
	} else {
		switch c {
		case ']':
			s.done = true
			return nil, io.EOF
		case ',':
			if c, err = s.nonSpace(); err != nil {
				return nil, s.eof(err)
			}
		default:
			s.done = true
			return nil, broken("the file is not valid JSON after conversation %d", s.pos)
		}
	}
	raw, err := s.value(c)
	s.pos++
	if err != nil {
		var se *SkipError
		if !errors.As(err, &se) {
			s.done = true
		}
		return nil, err
	}
	return raw, nil
}

func (s *Scanner) eof(err error) error {
	s.done = true
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		if !s.started || (!s.single || s.pos == 0) {
			return broken("the file ends before its list of conversations does")
		}
		return io.EOF
	}
	return err
}

// nonSpace returns the next byte that is not JSON white space.
func (s *Scanner) nonSpace() (byte, error) {
	for {
		c, err := s.br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return c, nil
		}
	}
}

// value reads one JSON value starting with c: its bytes (unless too large,
// too deep or discarding), following strings and nesting byte by byte.
func (s *Scanner) value(c byte) ([]byte, error) {
	s.buf = s.buf[:0]
	n := s.pos + 1
	tooLarge, tooDeep := false, false
	keep := func(b byte) {
		if s.discard || tooLarge || tooDeep {
			return
		}
		if len(s.buf) >= s.maxBytes {
			tooLarge, s.buf = true, s.buf[:0]
			return
		}
		s.buf = append(s.buf, b)
	}
	if c != '{' && c != '[' {
		// A scalar where a conversation should be: read it to its end.
		if c == '"' {
			keep(c)
			if err := s.str(keep); err != nil {
				return nil, s.truncated(err, n)
			}
		} else {
			for {
				b, err := s.br.Peek(1)
				if err != nil || b[0] == ',' || b[0] == ']' || b[0] == ' ' || b[0] == '\n' || b[0] == '\r' || b[0] == '\t' {
					break
				}
				_, _ = s.br.ReadByte()
			}
		}
		return nil, skip(fmt.Sprintf("conversation %d is not a JSON object", n))
	}
	depth := 0
	for {
		keep(c)
		switch c {
		case '{', '[':
			depth++
			if depth > s.maxDepth {
				tooDeep = true
			}
		case '}', ']':
			depth--
		case '"':
			if err := s.str(keep); err != nil {
				return nil, s.truncated(err, n)
			}
		}
		if depth == 0 {
			break
		}
		var err error
		if c, err = s.br.ReadByte(); err != nil {
			return nil, s.truncated(err, n)
		}
	}
	switch {
	case tooDeep:
		return nil, skip(fmt.Sprintf("it is nested more than %d levels deep", s.maxDepth))
	case tooLarge:
		return nil, skip("it is larger than " + usererr.Size(int64(s.maxBytes)))
	}
	return s.buf, nil
}

// str reads the rest of a string whose opening quote was read.
func (s *Scanner) str(keep func(byte)) error {
	for {
		c, err := s.br.ReadByte()
		if err != nil {
			return err
		}
		keep(c)
		switch c {
		case '\\':
			if c, err = s.br.ReadByte(); err != nil {
				return err
			}
			keep(c)
		case '"':
			return nil
		}
	}
}

func (s *Scanner) truncated(err error, n int) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return broken("the file ends in the middle of conversation %d", n)
	}
	return err
}
