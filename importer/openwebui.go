package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"weft/db"
)

// Open WebUI's export (GET /api/v1/chats/export, and the chat menu's
// "Export chat (.json)", which writes a list of one): a list of
// {id, user_id, title, chat: {title, models, history: {messages: {id:
// {id, parentId, childrenIds, role, content, model, timestamp, files…}},
// currentId}, messages: [...], timestamp}, created_at, updated_at}. Times
// are Unix seconds (chat.timestamp milliseconds).
type owuiExport struct {
	Title     string   `json:"title"`
	Chat      owuiChat `json:"chat"`
	CreatedAt *float64 `json:"created_at"`
	UpdatedAt *float64 `json:"updated_at"`
}

type owuiChat struct {
	Title   string   `json:"title"`
	Models  []string `json:"models"`
	History struct {
		Messages  map[string]owuiMessage `json:"messages"`
		CurrentID *string                `json:"currentId"`
	} `json:"history"`
	Messages  []owuiMessage `json:"messages"`
	Timestamp *float64      `json:"timestamp"`
}

type owuiMessage struct {
	ID          string          `json:"id"`
	ParentID    *string         `json:"parentId"`
	ChildrenIDs []string        `json:"childrenIds"`
	Role        string          `json:"role"`
	Content     json.RawMessage `json:"content"`
	Model       string          `json:"model"`
	Timestamp   *float64        `json:"timestamp"`
	Files       json.RawMessage `json:"files"` // read item by item
	Error       json.RawMessage `json:"error"`
	Done        *bool           `json:"done"`
}

// ParseOpenWebUI maps one chat of Open WebUI's export onto Weft's tree; a
// *SkipError says why it cannot be.
func ParseOpenWebUI(raw []byte, lim Limits) (Conversation, error) {
	lim = lim.WithDefaults()
	var e owuiExport
	if err := checkWidth(raw, lim); err != nil {
		return Conversation{}, err
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return Conversation{}, skip(shapeError("an Open WebUI", err))
	}
	h := e.Chat.History
	msgs := h.Messages
	current := ""
	if h.CurrentID != nil {
		current = *h.CurrentID
	}
	if len(msgs) == 0 && len(e.Chat.Messages) > 0 {
		// Older chats have only the visible list: a chain.
		if err := checkCount(len(e.Chat.Messages), lim); err != nil {
			return Conversation{}, err
		}
		msgs = make(map[string]owuiMessage, len(e.Chat.Messages))
		prev := ""
		for i, m := range e.Chat.Messages {
			if m.ID == "" {
				m.ID = fmt.Sprintf("#%d", i)
			}
			if m.ParentID == nil {
				p := prev
				m.ParentID = &p
			}
			msgs[m.ID] = m
			prev = m.ID
		}
		if current == "" {
			current = prev
		}
	}
	if len(msgs) == 0 {
		return Conversation{}, skip("it has no messages")
	}
	if err := checkCount(len(msgs), lim); err != nil {
		return Conversation{}, err
	}
	var c Conversation
	c.Thread.Title = title(cmpOr(e.Title, e.Chat.Title), lim)
	if e.CreatedAt != nil {
		c.Thread.CreatedAt = epoch(*e.CreatedAt)
	} else if e.Chat.Timestamp != nil {
		c.Thread.CreatedAt = epoch(*e.Chat.Timestamp)
	}
	if e.UpdatedAt != nil {
		c.Thread.UpdatedAt = epoch(*e.UpdatedAt)
	}
	defModel := ""
	if len(e.Chat.Models) > 0 {
		defModel = e.Chat.Models[0]
	}
	order := make(map[string]int, len(msgs)) // of the messages' ids only
	for key, m := range msgs {
		if m.ID != "" {
			key = m.ID
		}
		order[key] = -1
	}
	for _, m := range msgs {
		for i, ch := range m.ChildrenIDs {
			if o, known := order[ch]; known && o < 0 {
				order[ch] = i
			}
		}
	}
	nodes := make([]node, 0, len(msgs))
	for key, m := range msgs {
		id := m.ID
		if id == "" {
			id = key
		}
		nd := node{id: id, order: order[id]}
		if m.ParentID != nil {
			nd.parent = *m.ParentID
		}
		if m.Timestamp != nil {
			nd.created = epoch(*m.Timestamp)
		}
		nd.keep, nd.msg = owuiMessageOut(m, defModel, lim, &c)
		nd.msg.CreatedAt = nd.created
		nodes = append(nodes, nd)
	}
	return finish(c, nodes, current, lim)
}

// owuiMessageOut maps one message: user and assistant text is kept (an
// answer that failed keeps its error), system messages are passed over,
// attached files are noted.
func owuiMessageOut(m owuiMessage, defModel string, lim Limits, c *Conversation) (bool, db.ImportedMessage) {
	if m.Role != "user" && m.Role != "assistant" {
		return false, db.ImportedMessage{}
	}
	b := newBody(lim)
	owuiContent(m.Content, b, c)
	items(m.Files, func(f []byte) {
		b.leftOut(c, func() string {
			var file struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(f, &file)
			return partName(file.Type)
		})
	})
	body := b.String()
	status, errText := db.MsgComplete, ""
	if len(m.Error) > 0 && string(m.Error) != "null" && string(m.Error) != "false" {
		var ev struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(m.Error, &ev) != nil || ev.Content == "" {
			ev.Content = "The answer failed in Open WebUI."
		}
		status = db.MsgError
		errText, _ = clean(ev.Content, 2000)
	} else if m.Role == "assistant" && m.Done != nil && !*m.Done {
		status = db.MsgInterrupted
	}
	body = strings.TrimSpace(body)
	if body == "" && status == db.MsgComplete {
		return false, db.ImportedMessage{}
	}
	model := ""
	if m.Role == "assistant" {
		model = cmpOr(m.Model, defModel)
	}
	return true, db.ImportedMessage{Role: m.Role, Content: text(body, lim, c), Status: status, Error: errText,
		Metadata: metadata(model, FormatOpenWebUI)}
}

// owuiContent reads a message's content into b: a string, or a list of
// parts in the OpenAI style ({type: "text", text} or an image).
func owuiContent(raw json.RawMessage, b *body, c *Conversation) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b.text(s)
		return
	}
	items(raw, func(item []byte) {
		var p struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(item, &p) != nil {
			return
		}
		if p.Type == "text" {
			b.text(p.Text)
			return
		}
		b.leftOut(c, func() string { return partName(p.Type) })
	})
}

func cmpOr(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

// safeField is a JSON field path for a message: ids from the file cut short.
func safeField(f string) string {
	f, _ = clean(f, 80)
	if f == "" {
		return "a field"
	}
	return "“" + f + "”"
}
