package db_test

import (
	"context"
	"errors"
	"testing"

	"weft/db"
	"weft/internal/testenv"
)

func TestCreatingARoomMakesItsHiddenThreadAndTheOwnersMembership(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := testenv.NewDB(t)
	alice, aws := newUser(t, store, "alice@example.com")
	bob, _ := newUser(t, store, "bob@example.com")
	room, err := store.CreateRoom(ctx, alice.ID, aws.ID, "Planning")
	if err != nil {
		t.Fatal(err)
	}
	if room.Name != "Planning" || room.OwnerID != alice.ID || room.WorkspaceID != aws.ID || !room.IsOwner() {
		t.Fatalf("room = %+v", room)
	}
	th, err := store.Thread(ctx, alice.ID, room.ThreadID)
	if err != nil {
		t.Fatal(err)
	}
	if !th.IsRoom || th.Title != "Planning" {
		t.Fatalf("backing thread = %+v, want is_room titled Planning", th)
	}
	if _, err := store.RoomForMember(ctx, bob.ID, room.ID); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a non-member reads the room: err = %v, want ErrNotFound", err)
	}
	if _, err := store.CreateRoom(ctx, bob.ID, aws.ID, "Mine"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("a room in another user's workspace: err = %v, want ErrNotFound", err)
	}
}
