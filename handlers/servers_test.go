package handlers_test

import (
	"context"
	"strings"
	"testing"

	"weft/internal/fakeollama"
	"weft/internal/testenv"
)

// With several model servers the model picker says where each model is,
// and the administration page lists the servers and their state; with one
// server neither appears.
func TestThePickerAndTheAdminPageShowTheModelServers(t *testing.T) {
	t.Parallel()
	a := fakeollama.New(t, fakeollama.WithModels(fakeollama.Model{Name: "tiny"},
		fakeollama.Model{Name: "embedder", Capabilities: []string{fakeollama.CapEmbedding}}))
	b := fakeollama.New(t, fakeollama.WithModels(fakeollama.Model{Name: "tiny"}, fakeollama.Model{Name: "big:70b"}))
	app := testenv.Start(t, testenv.NewDB(t), testenv.Options{Fake: a, MoreFakes: []*fakeollama.Server{b}})
	c := testenv.NewClient(t, app.TS.URL)
	c.Register("admin@example.com", password) // the first account administers
	la, lb := strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")

	home := c.Get("/").Body
	for _, want := range []string{
		`data-testid="model-servers" data-servers="` + la + `, ` + lb + `"`,
		`>tiny:latest · ` + la + `, ` + lb + `</option>`,
		`>big:70b · ` + lb + `</option>`,
	} {
		if !strings.Contains(home, want) {
			t.Errorf("the composer's picker lacks %s", want)
		}
	}
	admin := c.Get("/admin").Body
	if n := strings.Count(admin, `data-testid="model-server" `); n != 2 || strings.Count(admin, ">answering") != 2 ||
		!strings.Contains(admin, "big:70b, tiny:latest") || !strings.Contains(admin, "embedder:latest, tiny:latest") {
		t.Fatalf("admin page: %d servers listed\n%s", n, section(admin, "admin-servers"))
	}
	b.SetDown(true)
	app.Servers.Refresh(context.Background())
	admin = c.Get("/admin").Body
	if !strings.Contains(admin, `data-server="`+lb+`"`) || strings.Count(admin, ">answering") != 1 || !strings.Contains(admin, "not answering") {
		t.Fatalf("admin page with %s down:\n%s", lb, section(admin, "admin-servers"))
	}
	if home := c.Get("/").Body; !strings.Contains(home, `>tiny:latest · `+la+`</option>`) {
		t.Errorf("with %s down the picker still says tiny is on it", lb)
	}

	one := testenv.Start(t, testenv.NewDB(t), testenv.Options{})
	c1 := testenv.NewClient(t, one.TS.URL)
	c1.Register("admin@example.com", password)
	if home := c1.Get("/").Body; strings.Contains(home, "model-servers") || !strings.Contains(home, `<option value="tiny:latest" selected>tiny:latest</option>`) {
		t.Errorf("one server: the picker names servers, or lost its plain options")
	}
	if admin := c1.Get("/admin").Body; strings.Contains(admin, "admin-servers") || one.Servers != nil {
		t.Errorf("one server: a model-server section on the admin page")
	}
}

// section is the part of a page from the element with class cls, for a
// failure's message.
func section(page, cls string) string {
	if i := strings.Index(page, cls); i >= 0 {
		return page[i:min(len(page), i+2000)]
	}
	return "(no " + cls + ")"
}
