package importer

import (
	"encoding/json"
	"fmt"
	"strings"

	"weft/db"
)

// ChatGPT's data export (conversations.json): a list of conversations, each
// {title, create_time, update_time, mapping: {node id: {id, message,
// parent, children}}, current_node, conversation_id, default_model_slug}.
// A message is {id, author: {role}, create_time, content: {content_type,
// parts | text…}, status, recipient, weight, metadata: {model_slug,
// is_visually_hidden_from_conversation…}}. Times are Unix seconds with a
// fraction.
type gptConversation struct {
	Title            string             `json:"title"`
	CreateTime       *float64           `json:"create_time"`
	UpdateTime       *float64           `json:"update_time"`
	Mapping          map[string]gptNode `json:"mapping"`
	CurrentNode      string             `json:"current_node"`
	DefaultModelSlug string             `json:"default_model_slug"`
}

type gptNode struct {
	ID       string      `json:"id"`
	Message  *gptMessage `json:"message"`
	Parent   *string     `json:"parent"`
	Children []string    `json:"children"`
}

type gptMessage struct {
	Author struct {
		Role string `json:"role"`
	} `json:"author"`
	CreateTime *float64    `json:"create_time"`
	Content    gptContent  `json:"content"`
	Status     looseString `json:"status"`
	Recipient  looseString `json:"recipient"`
	Weight     *float64    `json:"weight"`
	Metadata   struct {
		ModelSlug looseString `json:"model_slug"`
		Hidden    bool        `json:"is_visually_hidden_from_conversation"`
	} `json:"metadata"`
}

// gptContent's fields other than the type and the parts vary with the
// content type (some are objects in kinds Weft does not read): only
// strings are taken.
type gptContent struct {
	ContentType string          `json:"content_type"`
	Parts       json.RawMessage `json:"parts"` // read item by item (gptParts)
	Text        looseString     `json:"text"`
	Language    looseString     `json:"language"`
	Title       looseString     `json:"title"`
}

// looseString is a string when the JSON value is one, else empty.
type looseString string

func (l *looseString) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*l = looseString(s)
	}
	return nil
}

// ParseChatGPT maps one conversation of ChatGPT's export onto Weft's tree;
// a *SkipError says why it cannot be.
func ParseChatGPT(raw []byte, lim Limits) (Conversation, error) {
	lim = lim.WithDefaults()
	var g gptConversation
	if err := checkWidth(raw, lim); err != nil {
		return Conversation{}, err
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		return Conversation{}, skip(shapeError("a ChatGPT", err))
	}
	if g.Mapping == nil {
		return Conversation{}, skip("it has no messages (no \"mapping\")")
	}
	if err := checkCount(len(g.Mapping), lim); err != nil {
		return Conversation{}, err
	}
	var c Conversation
	c.Thread.Title = title(g.Title, lim)
	if g.CreateTime != nil {
		c.Thread.CreatedAt = epoch(*g.CreateTime)
	}
	if g.UpdateTime != nil {
		c.Thread.UpdatedAt = epoch(*g.UpdateTime)
	}
	// Children lists give the order of siblings (ChatGPT's 1/2, 2/2); only
	// the ids of nodes are kept (the lists may name millions of others).
	order := make(map[string]int, len(g.Mapping))
	for key, n := range g.Mapping {
		if n.ID != "" {
			key = n.ID
		}
		order[key] = -1
	}
	for _, n := range g.Mapping {
		for i, ch := range n.Children {
			if o, known := order[ch]; known && o < 0 {
				order[ch] = i
			}
		}
	}
	nodes := make([]node, 0, len(g.Mapping))
	for key, n := range g.Mapping {
		id := n.ID
		if id == "" {
			id = key
		}
		nd := node{id: id, order: order[id]}
		if n.Parent != nil {
			nd.parent = *n.Parent
		}
		if m := n.Message; m != nil {
			if m.CreateTime != nil {
				nd.created = epoch(*m.CreateTime)
			}
			nd.keep, nd.msg = gptMessageOut(m, g.DefaultModelSlug, lim, &c)
			nd.msg.CreatedAt = nd.created
		}
		nodes = append(nodes, nd)
	}
	if c.Thread.CreatedAt.IsZero() {
		for _, n := range nodes {
			if !n.created.IsZero() && (c.Thread.CreatedAt.IsZero() || n.created.Before(c.Thread.CreatedAt)) {
				c.Thread.CreatedAt = n.created
			}
		}
	}
	return finish(c, nodes, g.CurrentNode, lim)
}

// gptMessageOut maps one message: user and assistant text is kept; system,
// tool and hidden messages, weight-0 nodes and the assistant's calls to
// tools are passed over.
func gptMessageOut(m *gptMessage, defModel string, lim Limits, c *Conversation) (bool, db.ImportedMessage) {
	role := m.Author.Role
	if role != "user" && role != "assistant" {
		return false, db.ImportedMessage{}
	}
	if m.Metadata.Hidden || (m.Weight != nil && *m.Weight == 0) {
		return false, db.ImportedMessage{}
	}
	toTool := m.Recipient != "" && m.Recipient != "all"
	var body string
	switch ct := m.Content.ContentType; ct {
	case "text", "multimodal_text", "":
		if toTool {
			return false, db.ImportedMessage{} // a call to a tool (browsing, image generation…)
		}
		body = gptParts(m.Content.Parts, lim, c)
	case "code":
		// Code the assistant ran (the code interpreter): kept as a code
		// block, as ChatGPT shows it.
		lang := strings.Map(func(r rune) rune {
			if r == '`' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, string(m.Content.Language))
		if lang == "unknown" {
			lang = ""
		}
		body = "```" + lang + "\n" + strings.ReplaceAll(string(m.Content.Text), "```", "` ` `") + "\n```"
	case "tether_quote":
		body = "> " + strings.ReplaceAll(strings.TrimSpace(string(m.Content.Text)), "\n", "\n> ")
		if m.Content.Title != "" {
			body += "\n\n— " + string(m.Content.Title)
		}
	default:
		// Reasoning, browsing displays, memory and other kinds: text when
		// there is some, else nothing.
		if m.Content.Text == "" || toTool {
			c.PartsSkipped++
			return false, db.ImportedMessage{}
		}
		body = string(m.Content.Text)
	}
	body = strings.TrimSpace(body)
	if body == "" {
		return false, db.ImportedMessage{}
	}
	status := db.MsgComplete
	if m.Status != "" && m.Status != "finished_successfully" && role == "assistant" {
		status = db.MsgInterrupted
	}
	model := string(m.Metadata.ModelSlug)
	if model == "" && role == "assistant" {
		model = defModel
	}
	if role == "user" {
		model = ""
	}
	return true, db.ImportedMessage{Role: role, Content: text(body, lim, c), Status: status,
		Metadata: metadata(model, FormatChatGPT)}
}

// gptParts joins a message's text parts; every other part (an image, a
// file, audio) is left out with a note where it was.
func gptParts(parts json.RawMessage, lim Limits, c *Conversation) string {
	b := newBody(lim)
	items(parts, func(p []byte) {
		var s string
		if p[0] == '"' && json.Unmarshal(p, &s) == nil {
			b.text(s)
			return
		}
		b.leftOut(c, func() string {
			var obj struct {
				ContentType string `json:"content_type"`
			}
			_ = json.Unmarshal(p, &obj)
			return partName(obj.ContentType)
		})
	})
	return b.String()
}

// partName names a part ChatGPT's export holds but Weft does not import.
func partName(ct string) string {
	switch {
	case strings.Contains(ct, "image"):
		return "image"
	case strings.Contains(ct, "audio"):
		return "audio"
	case strings.Contains(ct, "video"):
		return "video"
	default:
		return "attachment"
	}
}

// shapeError says, for the report, how a conversation is not of the
// format's shape.
func shapeError(format string, err error) string {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case asErr(err, &typ):
		return fmt.Sprintf("it is not shaped like %s conversation (%s has the wrong type)", format, safeField(typ.Field))
	case asErr(err, &syn):
		return "it is not valid JSON"
	}
	return fmt.Sprintf("it is not shaped like %s conversation", format)
}
