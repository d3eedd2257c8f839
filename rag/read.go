// Package rag owns knowledge bases: their rules (names, embedding models,
// settings, what an upload may be; kb.go, refusals carry their message
// through usererr), structure-aware chunking, embedding and indexing jobs,
// hybrid retrieval, citations and the rag route. Documents
// are read by package extract, in its jail. It reads and writes only
// through db and speaks to the model server only through the Ollama client.
package rag

import "weft/extract"

// Block is a piece of a document with where it stands (see extract.Block).
type Block = extract.Block

// Formats a knowledge base accepts (see extract).
const (
	FormatPDF      = extract.FormatPDF
	FormatDOCX     = extract.FormatDOCX
	FormatHTML     = extract.FormatHTML
	FormatMarkdown = extract.FormatMarkdown
	FormatText     = extract.FormatText
	FormatCSV      = extract.FormatCSV
)
