package views

// SanitizeRendered is the markdown policy on its own, for the tests of the
// external test package (views_test).
var SanitizeRendered = markdownPolicy.Sanitize
