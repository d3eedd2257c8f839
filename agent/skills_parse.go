// The front matter of a SKILL.md: a small reader of the YAML subset skills
// use, so that no YAML library reads untrusted files.

package agent

import (
	"errors"
	"fmt"
	"strings"
)

// frontMatter is what a SKILL.md says about itself.
type frontMatter struct {
	name, description string
}

// parseSkill splits a SKILL.md into its front matter and body. The front
// matter is a block between "---" lines at the very start, of "key: value"
// lines: a value may be quoted ('…' or "…"), a block scalar (| or >) or a
// plain value continued on indented lines. Only name and description are
// read; other keys (license, metadata, …) are allowed and ignored.
func parseSkill(data []byte) (frontMatter, string, error) {
	text := strings.TrimPrefix(string(data), "\uFEFF")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	first, rest, _ := strings.Cut(text, "\n")
	if strings.TrimRight(first, " \t") != "---" {
		return frontMatter{}, "", errors.New("Its SKILL.md does not start with a front matter block (a line ---, then name: and description:, then ---).")
	}
	var fm frontMatter
	var key *string  // the value being continued
	var block string // "|" or ">" while in a block scalar
	seen := map[string]bool{}
	for {
		if rest == "" {
			return frontMatter{}, "", errors.New("Its SKILL.md's front matter block is not closed by a line ---.")
		}
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		trimmed := strings.TrimSpace(line)
		if trimmed == "---" || trimmed == "..." {
			break
		}
		if line != "" && (line[0] == ' ' || line[0] == '\t') {
			if key != nil && trimmed != "" {
				sep := " "
				if block == "|" {
					sep = "\n"
				}
				if *key == "" {
					sep = ""
				}
				*key += sep + trimmed
			}
			continue
		}
		key, block = nil, ""
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return frontMatter{}, "", fmt.Errorf("Its SKILL.md's front matter has a line that is not key: value: %q.", clip(line, 60))
		}
		k = strings.TrimSpace(k)
		var dst *string
		switch k {
		case "name":
			dst = &fm.name
		case "description":
			dst = &fm.description
		default:
			continue
		}
		if seen[k] {
			return frontMatter{}, "", fmt.Errorf("Its SKILL.md's front matter gives %s twice.", k)
		}
		seen[k] = true
		v = strings.TrimSpace(v)
		key = dst
		if (strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">")) && strings.Trim(v[1:], "+-0123456789") == "" {
			block = v[:1] // a block scalar: the indented lines that follow
			continue
		}
		val, err := scalar(v)
		if err != nil {
			return frontMatter{}, "", fmt.Errorf("Its SKILL.md's %s: %w.", k, err)
		}
		*dst = val
	}
	fm.name = strings.TrimSpace(fm.name)
	return fm, strings.TrimLeft(rest, "\n"), nil
}

// scalar is a front matter value without its quotes.
func scalar(v string) (string, error) {
	switch {
	case v == "":
		return "", nil
	case v[0] == '"':
		if len(v) < 2 || v[len(v)-1] != '"' {
			return "", errors.New("its opening quote is not closed on the same line")
		}
		inner := v[1 : len(v)-1]
		var b strings.Builder
		for i := 0; i < len(inner); i++ {
			c := inner[i]
			if c != '\\' || i+1 == len(inner) {
				b.WriteByte(c)
				continue
			}
			i++
			switch inner[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(inner[i]) // \" \\ and anything else as itself
			}
		}
		return b.String(), nil
	case v[0] == '\'':
		if len(v) < 2 || v[len(v)-1] != '\'' {
			return "", errors.New("its opening quote is not closed on the same line")
		}
		return strings.ReplaceAll(v[1:len(v)-1], "''", "'"), nil
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i]) // a comment after a plain value
	}
	return v, nil
}

// clipBytes cuts s to at most n bytes at a whole character, marking the cut.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutText(s, n-len("…")) + "…"
}
