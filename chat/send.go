package chat

import (
	"context"
	"errors"
	"fmt"

	"weft/db"
	"weft/internal/usererr"
	"weft/media"
)

// Input is one send from the composer.
type Input struct {
	WorkspaceID int64 // for a new thread
	ThreadID    int64 // 0: the message starts a new thread
	Content     string
	Model       string // "" keeps the thread's model
	// SetRole gives the thread RoleID (nil: no role); false keeps its role.
	SetRole bool
	RoleID  *int64
	// From, for a new thread, copies the settings of one of the user's
	// threads (the /new command).
	From int64
	// SetKBs attaches exactly KBs to the thread (the composer's kb field).
	SetKBs bool
	KBs    []int64
	// SetAgent turns the thread's agent mode to Agent (the composer's
	// agent field).
	SetAgent bool
	Agent    bool
	// SetWeb turns the thread's web search to Web (the composer's web
	// field).
	SetWeb bool
	Web    bool
	// Files are the files sent with the message, as read from the request;
	// Media are generated images of the user attached to it.
	Files []media.Upload
	Media []int64
}

// Files checks and stores the files of a message (media.Service).
type Files interface {
	Limits() media.Limits
	// Prepare checks, sniffs and reads files, writing nothing; a refused
	// file wraps media.ErrRefused.
	Prepare(ctx context.Context, files []media.Upload) ([]media.Prepared, error)
	Store(files []media.Prepared) ([]db.NewAttachment, error)
}

// ErrRefused is wrapped by every refusal of a send beyond the text's own
// (ErrEmpty, ErrTooLong): the files, the model or the user's storage. Its
// user message (usererr.Message) is the whole sentence to show.
var ErrRefused = errors.New("message refused")

// ErrNoSuchImage refuses an attached image that is not one of the user's
// ready generated images.
var ErrNoSuchImage = refused(nil, "Message not sent: an attached image does not exist (only generated images can be attached).")

// refused is a refusal of a send showing msg; cause is for the log.
func refused(cause error, msg string) error {
	if cause == nil {
		return usererr.Wrap(ErrRefused, msg)
	}
	return usererr.Wrap(fmt.Errorf("%w: %w", ErrRefused, cause), msg)
}

// defaultUserMaxBytes is Config.UserMaxBytes when unset (1 GiB).
const defaultUserMaxBytes = 1 << 30

// Send validates a user message, checks what it carries, stores its files
// and commits it with the assistant message and the queued run that will
// answer it, then starts the run if the thread and the user have room.
// Everything that can refuse the message is decided before a file is
// written: the attached images exist, the files are few and acceptable,
// the thread (or workspace) is the user's, the model sees images, the user
// has room, the text is valid. A new thread comes into being with its
// first message, in the same transaction, never before.
func (rt *Runtime) Send(ctx context.Context, user int64, in Input) (db.Sent, error) {
	prepared, err := rt.checkFiles(ctx, user, in)
	if err != nil {
		return db.Sent{}, err
	}
	content, err := validContent(in.Content)
	if errors.Is(err, ErrEmpty) && (len(prepared) > 0 || len(in.Media) > 0) {
		content, err = "", nil // files alone are a message
	}
	if err != nil {
		return db.Sent{}, err
	}
	var files []db.NewAttachment
	if len(prepared) > 0 {
		if files, err = rt.cfg.Files.Store(prepared); err != nil {
			return db.Sent{}, fmt.Errorf("store the files: %w", err)
		}
	}
	model := in.Model
	if model == "" && in.ThreadID == 0 {
		model = rt.models.Default(ctx)
	}
	sent, err := rt.store.SendMessage(ctx, user, db.Send{
		ThreadID: in.ThreadID, WorkspaceID: in.WorkspaceID, Title: provisionalTitle(content), Model: model,
		Content: content, SetRole: in.SetRole, RoleID: in.RoleID, SettingsFrom: in.From,
		SetKBs: in.SetKBs, KBs: in.KBs, SetAgent: in.SetAgent, Agent: in.Agent, SetWeb: in.SetWeb, Web: in.Web,
		Attachments: files, Media: in.Media, Route: ChooseRoute,
	})
	return rt.queued(sent, gone(err, in))
}

// gone names what a send refers to that was deleted meanwhile (the commit
// found it missing).
func gone(err error, in Input) error {
	if !errors.Is(err, db.ErrNotFound) {
		return err
	}
	switch {
	case in.RoleID != nil:
		return refused(err, "Message not sent: that role does not exist any more. Choose another one.")
	case len(in.KBs) > 0:
		return refused(err, "Message not sent: a chosen knowledge base does not exist any more (reload the page).")
	case len(in.Media) > 0:
		return refused(err, "Message not sent: an attached image does not exist any more (reload the page).")
	}
	return err
}

// checkFiles decides everything about a message's files and images that
// can refuse it, and returns the files prepared (read, not yet written).
func (rt *Runtime) checkFiles(ctx context.Context, user int64, in Input) ([]media.Prepared, error) {
	var lim media.Limits
	if rt.cfg.Files != nil {
		lim = rt.cfg.Files.Limits()
	}
	if len(in.Files) == 0 && len(in.Media) == 0 {
		return nil, nil // a text message: nothing here can refuse it
	}
	var model string
	// One snapshot for the reads (the Store interface is the runtime's
	// writes; its snapshot is the whole read side of db). Nothing in it
	// waits on the network: the default model is looked up after it.
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		for _, id := range in.Media {
			md, err := s.MediaByID(ctx, user, id)
			if err != nil || md.Kind != db.MediaImage || md.Status != db.MediaReady {
				return ErrNoSuchImage
			}
		}
		if n := len(in.Files) + len(in.Media); lim.MaxFiles > 0 && n > lim.MaxFiles {
			return refused(nil, fmt.Sprintf("Message not sent: %d files; at most %d a message.", n, lim.MaxFiles))
		}
		var err error
		model, err = rt.sendModel(ctx, s, user, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	if model == "" {
		model = rt.models.Default(ctx)
	}
	var prepared []media.Prepared
	if len(in.Files) > 0 {
		if rt.cfg.Files == nil {
			return nil, errors.New("chat: files sent but no file store configured")
		}
		prepared, err = rt.cfg.Files.Prepare(ctx, in.Files)
		if msg, ok := usererr.Message(err); ok && errors.Is(err, media.ErrRefused) {
			return nil, refused(err, "Message not sent: "+msg)
		}
		if err != nil {
			return nil, fmt.Errorf("read the files: %w", err)
		}
	}
	if images(prepared)+len(in.Media) > 0 {
		if has, _ := rt.models.Supports(ctx, model, "vision"); !has {
			return nil, refused(nil, fmt.Sprintf("Message not sent: the model %s cannot see images. Choose a model with vision (such as llava or a gemma3 model), or send the image without it.", model))
		}
	}
	return prepared, rt.checkRoom(ctx, user, prepared)
}

// sendModel is the model that will answer in: the one chosen, else the
// thread's ("" leaves the default to the caller); it also checks that the
// thread (or the workspace of a new one) is the user's.
func (rt *Runtime) sendModel(ctx context.Context, s *db.DB, user int64, in Input) (string, error) {
	model := in.Model
	if in.ThreadID != 0 {
		t, err := s.Thread(ctx, user, in.ThreadID)
		if err != nil {
			return "", err
		}
		if model == "" {
			model = t.Model
		}
	} else if _, err := s.Workspace(ctx, user, in.WorkspaceID); err != nil {
		return "", err
	}
	return model, nil
}

func images(files []media.Prepared) int {
	n := 0
	for _, p := range files {
		if p.Attachment.Kind == db.AttachImage {
			n++
		}
	}
	return n
}

// checkRoom refuses files the user has no room for: what they store, plus
// the files their attachments do not hold yet, must stay within
// Config.UserMaxBytes. Checked before writing, not under a lock:
// concurrent sends of one user may pass the limit by what they carry (each
// message is capped).
func (rt *Runtime) checkRoom(ctx context.Context, user int64, files []media.Prepared) error {
	if len(files) == 0 {
		return nil
	}
	shas := make([]string, len(files))
	for i, p := range files {
		shas[i] = p.Attachment.SHA256
	}
	var used int64
	var held map[string]bool
	err := rt.store.ReadSnapshot(ctx, func(s *db.DB) error {
		var err error
		used, held, err = s.StorageUse(ctx, user, shas)
		return err
	})
	if err != nil {
		return fmt.Errorf("read the storage used: %w", err)
	}
	for _, p := range files {
		if !held[p.Attachment.SHA256] {
			held[p.Attachment.SHA256] = true
			used += p.Attachment.Size
		}
	}
	max := rt.cfg.UserMaxBytes
	if max <= 0 {
		max = defaultUserMaxBytes
	}
	if used > max {
		return refused(nil, "Message not sent: "+db.StorageLimitMessage(max))
	}
	return nil
}
