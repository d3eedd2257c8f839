package media

import (
	"archive/zip"
	"bytes"
	"strings"
	"testing"
	"weft/internal/hostile"
)

const wordNS = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"`

// docxOf is a minimal Word document whose body is the given XML.
func docxOf(t testing.TB, body string) []byte {
	return hostile.Zip("[Content_Types].xml", `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`,
		"word/document.xml", `<?xml version="1.0" encoding="UTF-8"?><w:document `+wordNS+`><w:body>`+body+`</w:body></w:document>`,
	)
}

// docxBomb is a Word document of a few hundred KB whose document.xml
// unpacks to more than unpacked bytes of valid XML: empty paragraphs among
// blanks, which a streaming reader can skip through without holding them.
func docxBomb(t testing.TB, unpacked int64) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.Create("word/document.xml")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(`<?xml version="1.0"?><w:document ` + wordNS + `><w:body>`))
	chunk := []byte("<w:p/>" + strings.Repeat(" ", 4090))
	for n := int64(0); n <= unpacked; n += int64(len(chunk)) {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	w.Write([]byte(`</w:body></w:document>`))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
