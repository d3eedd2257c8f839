// Package static embeds the files served under /static: the vendored htmx
// 2.0.x and its SSE extension 2.2.x (versions in the file names, so an
// upgrade is never accidental), the hand-written CSS and the small scripts
// (app.js says which does what).
package static

import "embed"

// FS holds the static files.
//
//go:embed *.js *.css
var FS embed.FS
