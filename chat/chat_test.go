package chat

import (
	"context"
	"errors"
	"strings"
	"testing"

	"weft/db"
)

// recordingStore remembers what Send asked to store. Send's own logic
// (validation, titles, new thread versus append) is pure; the store itself
// is tested on real Postgres in package db.
type recordingStore struct {
	created  []db.NewThread
	appended []string
}

func (r *recordingStore) CreateThread(_ context.Context, _ int64, nt db.NewThread) (db.Thread, db.Message, error) {
	r.created = append(r.created, nt)
	return db.Thread{ID: 7}, db.Message{ID: 1, Content: nt.Content}, nil
}

func (r *recordingStore) AppendUserMessage(_ context.Context, _, _ int64, content string) (db.Message, error) {
	r.appended = append(r.appended, content)
	return db.Message{ID: 2, Content: content}, nil
}

func TestSendValidatesAndRoutesTheMessage(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        Input
		wantErr   error
		wantNew   bool
		wantTitle string
	}{
		{"empty", Input{WorkspaceID: 1, Content: "  \n\t "}, ErrEmpty, false, ""},
		{"too long", Input{WorkspaceID: 1, Content: strings.Repeat("é", MaxMessageRunes+1)}, ErrTooLong, false, ""},
		{"new thread", Input{WorkspaceID: 1, Content: "  Hello\nthere  "}, nil, true, "Hello"},
		{"long first line", Input{WorkspaceID: 1, Content: strings.Repeat("word ", 30)}, nil, true, strings.Repeat("word ", 11) + "word…"},
		{"append", Input{ThreadID: 7, Content: "more"}, nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &recordingStore{}
			sent, err := New(store).Send(context.Background(), 1, tc.in)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if len(store.created)+len(store.appended) != 0 {
					t.Fatal("a rejected message was stored")
				}
				return
			}
			if sent.Created != tc.wantNew || sent.ThreadID != 7 {
				t.Fatalf("sent = %+v", sent)
			}
			if tc.wantNew {
				if store.created[0].Title != tc.wantTitle {
					t.Fatalf("title = %q, want %q", store.created[0].Title, tc.wantTitle)
				}
				if store.created[0].Content != strings.TrimSpace(tc.in.Content) {
					t.Fatalf("content = %q", store.created[0].Content)
				}
			} else if store.appended[0] != "more" {
				t.Fatalf("appended = %v", store.appended)
			}
		})
	}
}
