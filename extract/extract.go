// Package extract owns reading untrusted files: detecting a document's
// format, the document readers (PDF, DOCX, HTML, Markdown, CSV, plain
// text), image headers and thumbnails, and the jail they run in. rag,
// media and agent call it; it imports no Weft package.
//
// Everything that parses a file beyond a bounded header runs in a child
// process (the running binary re-executed with the __weft-extract
// subcommand) under hard limits on memory, CPU time, files and network
// (see Jail): a hostile file can make a library allocate without bound,
// loop forever or crash, and only a process boundary turns that into an
// error for the one file instead of a dead server. This package must
// never parse a document or decode an image's pixels in the server's own
// process: Read and Thumbnail go through the jail, and ReadInProcess and
// ThumbnailInProcess exist only for the child and for fuzzing. Detect and
// ImageHeader stay in process because they read a bounded header.
//
// Errors shown to users are *ReadError (Error is the message); the causes
// are sentinels for errors.Is: ErrUnsupported, ErrTooLarge, and for a
// child the jail stopped, ErrJailMemory, ErrJailTimeout and ErrJailCrashed.
package extract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Sentinels for a child the jail stopped, wrapped by the *ReadError that
// Read and Thumbnail return for it.
var (
	ErrJailMemory  = errors.New("extract: the reader ran out of its memory limit")
	ErrJailTimeout = errors.New("extract: the reader ran out of time")
	ErrJailCrashed = errors.New("extract: the reader crashed")
)

// Read extracts the blocks of a document in the given format (see Detect)
// in a jailed child process of the default Jail (see Configure), within
// lim. It returns what ReadInProcess would, or, for a child that ran out
// of memory or time or crashed, a *ReadError wrapping ErrJailMemory,
// ErrJailTimeout or ErrJailCrashed whose message names the kind of file.
// Cancellation gives ctx.Err(); an error that is no *ReadError (the child
// could not be started) is the server's, not the file's.
func Read(ctx context.Context, format string, data []byte, lim Limits) ([]Block, error) {
	return Default().Read(ctx, format, data, lim)
}

// Thumbnail is ThumbnailInProcess run in a jailed child of the default
// Jail; errors as for Read.
func Thumbnail(ctx context.Context, data []byte, maxSide int) ([]byte, error) {
	return Default().Thumbnail(ctx, data, maxSide)
}

// Read is the package-level Read on this jail.
func (j *Jail) Read(ctx context.Context, format string, data []byte, lim Limits) ([]Block, error) {
	if !knownFormat(format) {
		return nil, ErrUnsupported // no child for what no reader takes
	}
	lim = lim.withDefaults()
	out, err := j.run(ctx, kindName(format), data, opRead, format,
		strconv.Itoa(lim.MaxText), strconv.FormatInt(lim.MaxUnzipped, 10), strconv.Itoa(lim.MaxPages))
	if err != nil {
		return nil, err
	}
	var blocks []Block
	if err := json.Unmarshal(out, &blocks); err != nil {
		return nil, fmt.Errorf("extract: the reader's answer: %w", err)
	}
	return blocks, nil
}

// Thumbnail is the package-level Thumbnail on this jail.
func (j *Jail) Thumbnail(ctx context.Context, data []byte, maxSide int) ([]byte, error) {
	return j.run(ctx, "This image", data, opThumb, strconv.Itoa(maxSide))
}

func knownFormat(format string) bool {
	switch format {
	case FormatPDF, FormatDOCX, FormatHTML, FormatMarkdown, FormatText, FormatCSV:
		return true
	}
	return false
}

// kindName names a file of the format at the start of a sentence.
func kindName(format string) string {
	switch format {
	case FormatPDF:
		return "This PDF"
	case FormatDOCX:
		return "This Word document"
	case FormatHTML:
		return "This HTML page"
	case FormatMarkdown:
		return "This Markdown file"
	case FormatCSV:
		return "This CSV file"
	}
	return "This text file"
}

// childError is a ReadError (or ErrUnsupported) as it crosses the pipe.
type childError struct {
	Msg  string `json:"msg"`
	Kind string `json:"kind,omitempty"` // "too_large", "unsupported" or ""
}

func encodeChildError(err error) childError {
	var re *ReadError
	switch {
	case errors.As(err, &re):
		ce := childError{Msg: re.Msg}
		switch {
		case errors.Is(err, ErrTooLarge):
			ce.Kind = "too_large"
		case errors.Is(err, ErrUnsupported):
			ce.Kind = "unsupported"
		}
		return ce
	case errors.Is(err, ErrUnsupported):
		return childError{Kind: "unsupported"}
	}
	return childError{Msg: "Weft could not read this file: it seems to be damaged."}
}

func (ce childError) err() error {
	var cause error
	switch ce.Kind {
	case "too_large":
		cause = ErrTooLarge
	case "unsupported":
		if ce.Msg == "" {
			return ErrUnsupported
		}
		cause = ErrUnsupported
	}
	return &ReadError{Msg: ce.Msg, Err: cause}
}
