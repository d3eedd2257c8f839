package extract

import (
	"context"
	"strings"
	"testing"
	"weft/internal/hostile"
)

const wordNS = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" ` +
	`xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"`

// docxFile is a minimal Word document whose body is the given XML; extra
// files (name, content pairs) are added to the archive.
func docxFile(t testing.TB, body string, extra ...string) []byte {
	files := []string{
		"[Content_Types].xml", `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`,
		"_rels/.rels", `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`,
		"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document ` + wordNS + `><w:body>` + body + `</w:body></w:document>`,
	}
	return hostile.Zip(append(files, extra...)...)
}

// para is a w:p with an optional style and runs of text.
func para(style string, runs ...string) string {
	var b strings.Builder
	b.WriteString("<w:p>")
	if style != "" {
		b.WriteString(`<w:pPr><w:pStyle w:val="` + style + `"/></w:pPr>`)
	}
	for _, r := range runs {
		b.WriteString(`<w:r><w:t xml:space="preserve">` + r + `</w:t></w:r>`)
	}
	b.WriteString("</w:p>")
	return b.String()
}

func TestReadDOCXReadsHeadingsTablesListsAndTextBoxesInOrder(t *testing.T) {
	localizedStyles := `<?xml version="1.0"?><w:styles ` + wordNS + `>` +
		`<w:style w:type="paragraph" w:styleId="berschrift1"><w:name w:val="heading 1"/></w:style>` +
		`<w:style w:type="paragraph" w:styleId="Custom"><w:name w:val="My Heading"/><w:pPr><w:outlineLvl w:val="1"/></w:pPr></w:style>` +
		`</w:styles>`
	tests := []struct {
		name string
		data []byte
		want []Block
	}{
		{"heading styles make the path and runs join into paragraphs",
			docxFile(t, para("Title", "Manual")+para("", "Intro ", "text.")+para("Heading1", "Setup")+
				para("", "Step one.")+para("Heading2", "Linux")+para("", "Apt.")+para("Heading1", "Usage")+para("", "Click.")),
			[]Block{
				{Text: "Intro text.", Headings: []string{"Manual"}},
				{Text: "Step one.", Headings: []string{"Manual", "Setup"}},
				{Text: "Apt.", Headings: []string{"Manual", "Setup", "Linux"}},
				{Text: "Click.", Headings: []string{"Manual", "Usage"}},
			}},
		{"localized and custom heading styles are found through styles.xml",
			docxFile(t, para("berschrift1", "Kapitel")+para("Custom", "Abschnitt")+para("", "Text."), "word/styles.xml", localizedStyles),
			[]Block{{Text: "Text.", Headings: []string{"Kapitel", "Abschnitt"}}}},
		{"a table is a table block with its rows in order",
			docxFile(t, para("Heading1", "Data")+`<w:tbl><w:tblPr/>`+
				`<w:tr><w:tc>`+para("", "Name")+`</w:tc><w:tc>`+para("", "Role")+`</w:tc></w:tr>`+
				`<w:tr><w:tc>`+para("", "Ann")+`</w:tc><w:tc>`+para("", "Lead")+para("", "and dev")+`</w:tc></w:tr>`+
				`</w:tbl>`+para("", "After.")),
			[]Block{
				{Text: "Name | Role\nAnn | Lead and dev", Headings: []string{"Data"}, Table: true},
				{Text: "After.", Headings: []string{"Data"}},
			}},
		{"tabs and breaks inside runs count, tab stops and deleted text do not",
			docxFile(t, `<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr>`+
				`<w:r><w:t>a</w:t><w:tab/><w:t>b</w:t><w:br/><w:t>c</w:t></w:r><w:del><w:r><w:delText>gone</w:delText></w:r></w:del></w:p>`),
			[]Block{{Text: "a\tb\nc"}}},
		{"a text box is read once, not again from its fallback",
			docxFile(t, `<w:p><w:r><w:t>Body</w:t></w:r><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><w:txbxContent>`+
				para("", "Boxed")+`</w:txbxContent></w:drawing></mc:Choice><mc:Fallback><w:pict><w:txbxContent>`+
				para("", "Boxed")+`</w:txbxContent></w:pict></mc:Fallback></mc:AlternateContent></w:r></w:p>`),
			[]Block{{Text: "Body\nBoxed"}}},
		{"numbered paragraphs read as list items",
			docxFile(t, `<w:p><w:pPr><w:numPr><w:ilvl w:val="0"/></w:numPr></w:pPr><w:r><w:t>item</w:t></w:r></w:p>`),
			[]Block{{Text: "- item"}}},
		{"the main part named in _rels/.rels is read",
			hostile.Zip("_rels/.rels", `<Relationships><Relationship Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="/word/document2.xml"/></Relationships>`,
				"word/document2.xml", `<w:document `+wordNS+`><w:body>`+para("", "Second")+`</w:body></w:document>`),
			[]Block{{Text: "Second"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertBlocks(t, read(t, FormatDOCX, tt.data), tt.want) })
	}
}

func TestReadDOCXRefusesHostileFilesClearly(t *testing.T) {
	// 4 MB of text that deflates to a few KB, against a 256 KB limit.
	bomb := docxFile(t, para("", strings.Repeat("a", 4<<20)))
	stylesBomb := docxFile(t, para("", "x"), "word/styles.xml", "<w:styles>"+strings.Repeat(" ", 4<<20)+"</w:styles>")
	valid := docxFile(t, para("", "text"))
	tests := []struct {
		name   string
		data   []byte
		lim    Limits
		want   string
		tooBig bool
	}{
		{"a zip bomb in document.xml", bomb, Limits{MaxUnzipped: 256 << 10}, "expands to more than 256 KB", true},
		{"a zip bomb in styles.xml", stylesBomb, Limits{MaxUnzipped: 256 << 10}, "expands to more than 256 KB", true},
		{"a zip without a Word document", hostile.Zip("readme.txt", "hi"), Limits{}, "not a Word document", false},
		{"a truncated zip", valid[:len(valid)/2], Limits{}, "not a readable ZIP archive", false},
		{"broken XML", docxFile(t, "<w:p><w:r><w:t>open</w:r>"), Limits{}, "text cannot be read", false},
		{"not a zip at all", []byte("plain text"), Limits{}, "not a readable ZIP archive", false},
		{"more text than MaxText", docxFile(t, para("", strings.Repeat("b", 500))), Limits{MaxText: 100}, "more than 100 characters", true},
	}
	for _, tt := range tests {
		t.Run(tt.name+" gives a clear error", func(t *testing.T) {
			_, err := ReadInProcess(context.Background(), FormatDOCX, tt.data, tt.lim)
			assertReadError(t, err, tt.want, tt.tooBig)
		})
	}
}
