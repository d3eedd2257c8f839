package rag

import (
	"net/url"
	"path"
	"strings"

	"weft/extract"
	"weft/internal/usererr"
	"weft/internal/webfetch"
)

// What a fetched page is, and the document name that makes ingestion read
// it so: ingestion decides the format from the name and the bytes
// (extract.Detect), as for an upload, so the name carries what the server's
// Content-Type said.

// webAccept is the Accept header of a page fetch: the formats a knowledge
// base reads.
const webAccept = "text/html,application/xhtml+xml,text/markdown,text/plain;q=0.9,text/csv;q=0.9,application/pdf;q=0.9," +
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document;q=0.8,*/*;q=0.1"

// mediaFormats maps the media types of pages to the format they must be
// read as ("" : what the content and the name say).
var mediaFormats = map[string]string{
	"text/html":                FormatHTML,
	"application/xhtml+xml":    FormatHTML,
	"text/markdown":            FormatMarkdown,
	"text/x-markdown":          FormatMarkdown,
	"text/csv":                 FormatCSV,
	"application/pdf":          FormatPDF,
	"application/octet-stream": "",
	"binary/octet-stream":      "",
	"":                         "",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": FormatDOCX,
}

// extFor is the extension that makes a name read as a text format.
var extFor = map[string]string{FormatMarkdown: ".md", FormatCSV: ".csv"}

// pageName is a page's name before it is fetched (and after, when it has
// no title): host and path, as people write them.
func pageName(u *url.URL) string {
	p := u.EscapedPath()
	if unescaped, err := url.PathUnescape(p); err == nil {
		p = unescaped
	}
	if p == "" {
		p = "/" // "example.com" would read as a .com file
	}
	return usererr.Untrusted(u.Host+p, extract.MaxFileNameRunes)
}

// pageContent decides what a fetched page is: its name and the bytes to
// store, and the format ingestion will read them as. A page no reader
// takes is refused with a message for the user.
func pageContent(resp *webfetch.Response) (name string, data []byte, format string, err error) {
	u, err := url.Parse(resp.URL)
	if err != nil {
		return "", nil, "", usererr.New("the server redirected to an address that cannot be read")
	}
	name, data = pageName(u), resp.Body
	want, known := mediaFormats[resp.MediaType]
	switch {
	case len(data) == 0:
		return "", nil, "", usererr.New("the page is empty")
	case !known && !strings.HasPrefix(resp.MediaType, "text/"):
		return "", nil, "", usererr.New("the page is " + usererr.Untrusted(resp.MediaType, 100) +
			", which a knowledge base cannot read (it takes HTML, plain text, Markdown, CSV, PDF and Word documents)")
	case want == FormatHTML:
		if f, _ := extract.Detect("page", data); f != FormatHTML {
			// A page served as HTML that does not start like one (a
			// fragment): said so in front, as its server did.
			data = append([]byte("<!doctype html>\n"), data...)
		}
		if title := usererr.Untrusted(webfetch.Title(string(data)), extract.MaxFileNameRunes); title != "" {
			name = title
		}
	case extFor[want] != "" && path.Ext(name) != extFor[want]:
		name += extFor[want]
	}
	format, err = extract.Detect(name, data)
	if err != nil {
		return "", nil, "", usererr.Wrap(err, usererr.Or(err, extract.ErrUnsupported.Error()))
	}
	if want != "" && format != want && !(want == FormatMarkdown && format == FormatHTML) {
		return "", nil, "", usererr.New("the page is not the " + want + " its server says it is")
	}
	return name, data, format, nil
}
