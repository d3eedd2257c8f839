package db

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Embedded is a private PostgreSQL cluster that Weft runs itself when no
// DATABASE_URL is given. It lives in one folder, listens only on 127.0.0.1 on
// a port chosen when the cluster is created, and requires a password that is
// generated then and kept next to the folder (mode 0600).
//
// PostgreSQL refuses to run as root, so when Weft runs as root the cluster is
// owned by and runs as the "postgres" system account (created by Debian's
// postgresql package).
//
// Two roles: the bootstrap superuser "weft" (password in <dir>.password),
// used only to set the cluster up, and the application role "weft_app"
// (password in <dir>.app-password), which owns the weft database and is
// what Weft connects as: not a superuser, so that a flaw in Weft cannot
// reach the server's files or run programs through it.
//
// The process that holds <dir>.lock (an flock, released by the kernel when
// the process dies, even by kill -9) owns the server: it starts it, or
// adopts it when it finds it running after its previous owner crashed, and
// stops it on Stop. Another Weft sharing the folder while the owner lives
// uses the server and leaves it running.
type Embedded struct {
	Dir string // the cluster's data directory
	URL string // connection string for the weft database, as the application role
	// AdminURL connects as the bootstrap superuser: for tests and tools
	// that create databases, never for Weft itself.
	AdminURL string
	bin      string // folder of initdb, pg_ctl, postgres
	cred     *syscall.Credential
	lock     *os.File // held while this process owns the server
	started  bool     // whether this process owns the server (and so stops it)
}

// appRole is the role Weft connects as; superRole the bootstrap superuser.
const (
	appRole   = "weft_app"
	superRole = "weft"
)

// StartEmbedded creates the cluster in dir when it does not exist yet,
// starts it (or adopts it, or uses it when another live Weft owns it; see
// Embedded), and makes sure the weft database exists, owned by the
// application role that URL connects as. Logs go to dir/server.log.
func StartEmbedded(ctx context.Context, dir string) (*Embedded, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	bin, err := findPostgresBin()
	if err != nil {
		return nil, err
	}
	e := &Embedded{Dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		if e.cred, err = postgresCredential(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	if err := e.own(ctx); err != nil {
		return nil, err
	}
	port, err := configuredPort(dir)
	if err == nil {
		err = e.ensureAppRole(ctx, port)
	}
	var pw string
	if err == nil {
		pw, err = e.appPassword()
	}
	if err != nil {
		_ = e.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	e.URL = fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/weft?sslmode=disable", appRole, pw, port)
	if su, err := os.ReadFile(e.Dir + ".password"); err == nil {
		e.AdminURL = fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/weft?sslmode=disable", superRole, strings.TrimSpace(string(su)), port)
	}
	return e, nil
}

// own takes the owner's lock when no live process holds it, creates the
// cluster if it does not exist, then starts the server, or adopts it when
// it is running (its owner died without stopping it). Without the lock
// (another Weft owns the server) it waits for the server to be up and uses
// it.
func (e *Embedded) own(ctx context.Context) error {
	f, err := os.OpenFile(e.Dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("embedded postgres: lock: %w", err)
	}
	// The lock can be held for a moment by a process forked from this one
	// (another goroutine's exec of pg_ctl holds a copy of every descriptor
	// until it execs), and its owner may die while we wait: try again
	// until the server runs under a live owner or the lock is ours.
	for deadline := time.Now().Add(90 * time.Second); ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("embedded postgres: lock: %w", err)
		}
		if e.running(ctx) { // another live Weft owns the server: use it, never stop it
			f.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			f.Close()
			return errors.New("embedded postgres: another Weft process owns the cluster but it is not running")
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid()) // for people: who owns it
	e.lock, e.started = f, true
	if _, err := os.Stat(filepath.Join(e.Dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := e.initdb(ctx, e.Dir+".password"); err != nil {
			e.release()
			return err
		}
	}
	if e.running(ctx) {
		slog.Info("embedded postgres: adopting the server left running by a previous process", "dir", e.Dir)
		return nil
	}
	buffers, err := sharedBuffers()
	if err != nil {
		e.release()
		return fmt.Errorf("embedded postgres: %w", err)
	}
	start := []string{"start", "-w", "-t", "60", "-D", e.Dir, "-l", filepath.Join(e.Dir, "server.log")}
	err = e.run(ctx, "pg_ctl", append(start, "-o", "-c shared_buffers="+buffers)...)
	if err != nil && os.Getenv("WEFT_PG_SHARED_BUFFERS") == "" {
		// The size Weft chose could not be mapped (a strict overcommit
		// limit, say): start with the cluster's own setting instead.
		slog.Warn("embedded postgres: could not start with the chosen shared_buffers, starting with the cluster's own", "shared_buffers", buffers, "err", err)
		err = e.run(ctx, "pg_ctl", start...)
	}
	if err != nil {
		e.release()
		return fmt.Errorf("embedded postgres: start (see %s): %w", filepath.Join(e.Dir, "server.log"), err)
	}
	return nil
}

func (e *Embedded) running(ctx context.Context) bool {
	return fileExists(filepath.Join(e.Dir, "PG_VERSION")) && e.run(ctx, "pg_ctl", "status", "-D", e.Dir) == nil
}

// appPassword returns the application role's password, generating it the
// first time (atomically: concurrent starts agree on one).
func (e *Embedded) appPassword() (string, error) {
	file := e.Dir + ".app-password"
	if b, err := os.ReadFile(file); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	secret := make([]byte, 18)
	_, _ = rand.Read(secret)
	tmp, err := os.CreateTemp(filepath.Dir(file), ".app-password-*")
	if err != nil {
		return "", fmt.Errorf("embedded postgres: write password: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(secret) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("embedded postgres: write password: %w", err)
	}
	if err := os.Link(tmp.Name(), file); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("embedded postgres: write password: %w", err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("embedded postgres: read password: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// ensureAppRole makes the cluster's weft database owned by the application
// role, which is not a superuser: it creates the role and the database
// when missing, creates the extensions Weft needs (only a superuser may
// create pgvector), and hands over everything the bootstrap superuser owns
// in the database (a cluster made by an older Weft, which connected as the
// superuser, keeps its data and works as before). It runs at every start
// and changes nothing once done.
func (e *Embedded) ensureAppRole(ctx context.Context, port int) error {
	pw, err := e.appPassword()
	if err != nil {
		return err
	}
	if !hexOnly(pw) {
		return errors.New("embedded postgres: the application password file is damaged")
	}
	script := `\set ON_ERROR_STOP on
SELECT pg_advisory_lock(4711);
DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '` + appRole + `') THEN
		CREATE ROLE ` + appRole + `;
	END IF;
END $$;
ALTER ROLE ` + appRole + ` WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD '` + pw + `';
SELECT 'CREATE DATABASE weft OWNER ` + appRole + `' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'weft') \gexec
ALTER DATABASE weft OWNER TO ` + appRole + `;
SELECT pg_advisory_unlock(4711);
\connect weft
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;
` + handOverSQL
	return e.psql(ctx, port, script)
}

// handOverSQL gives the application role what the superuser owns in the
// weft database, except the extensions' own objects: tables (with their
// identity sequences), other sequences, views, functions and types.
const handOverSQL = `DO $$
DECLARE
	r record;
	su oid := (SELECT oid FROM pg_roles WHERE rolname = '` + superRole + `');
BEGIN
	FOR r IN SELECT c.oid, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relowner = su AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
			AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
			AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
	LOOP
		EXECUTE format('ALTER %s %s OWNER TO ` + appRole + `',
			CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END, r.oid::regclass);
	END LOOP;
	-- Sequences not tied to a table (those moved with their table).
	FOR r IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relowner = su AND c.relkind = 'S' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
			AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i', 'e'))
	LOOP
		EXECUTE format('ALTER SEQUENCE %s OWNER TO ` + appRole + `', r.oid::regclass);
	END LOOP;
	FOR r IN SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proowner = su AND n.nspname NOT IN ('pg_catalog', 'information_schema')
			AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
	LOOP
		EXECUTE format('ALTER ROUTINE %s OWNER TO ` + appRole + `', r.oid::regprocedure);
	END LOOP;
	FOR r IN SELECT t.oid FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
		WHERE t.typowner = su AND t.typtype IN ('e', 'd', 'c', 'r') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
			AND (t.typrelid = 0 OR (SELECT relkind FROM pg_class WHERE oid = t.typrelid) = 'c')
			AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_type'::regclass AND d.objid = t.oid AND d.deptype = 'e')
	LOOP
		EXECUTE format('ALTER TYPE %s OWNER TO ` + appRole + `', r.oid::regtype);
	END LOOP;
	FOR r IN SELECT n.oid FROM pg_namespace n WHERE n.nspowner = su AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'public')
		AND n.nspname NOT LIKE 'pg_%'
	LOOP
		EXECUTE format('ALTER SCHEMA %I OWNER TO ` + appRole + `', (SELECT nspname FROM pg_namespace WHERE oid = r.oid));
	END LOOP;
END $$;
`

func hexOnly(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// psql runs a script as the bootstrap superuser on the maintenance
// database.
func (e *Embedded) psql(ctx context.Context, port int, script string) error {
	pw, err := os.ReadFile(e.Dir + ".password")
	if err != nil {
		return fmt.Errorf("embedded postgres: read password: %w", err)
	}
	cmd := exec.CommandContext(ctx, psqlPath(e.bin), "-X", "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-U", superRole, "-d", "postgres", "-f", "-")
	cmd.Env = append(os.Environ(), "PGPASSWORD="+strings.TrimSpace(string(pw)))
	cmd.Stdin = strings.NewReader(script)
	if e.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
		cmd.Dir = "/"
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("embedded postgres: set up the application role: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// release gives up ownership without stopping the server.
func (e *Embedded) release() {
	if e.lock != nil {
		e.lock.Close() // closing the last descriptor drops the flock
		e.lock = nil
	}
	e.started = false
}

// Stop shuts the cluster down if this process owns it.
func (e *Embedded) Stop(ctx context.Context) error {
	if e == nil || !e.started {
		return nil
	}
	defer e.release() // after the stop: no other process may adopt a server stopping
	return e.run(ctx, "pg_ctl", "stop", "-w", "-m", "fast", "-D", e.Dir)
}
