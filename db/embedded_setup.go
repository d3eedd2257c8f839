package db

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Creating and running the embedded cluster's files and processes:
// initdb, finding the PostgreSQL binaries, ports and permissions.

func (e *Embedded) initdb(ctx context.Context, pwFile string) error {
	if err := os.MkdirAll(filepath.Dir(e.Dir), 0o755); err != nil {
		return fmt.Errorf("embedded postgres: %w", err)
	}
	if err := os.MkdirAll(e.Dir, 0o700); err != nil {
		return fmt.Errorf("embedded postgres: %w", err)
	}
	secret := make([]byte, 18)
	_, _ = rand.Read(secret)
	pw := hex.EncodeToString(secret)
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		return fmt.Errorf("embedded postgres: write password: %w", err)
	}
	// initdb reads the superuser password from a file it must be able to open.
	tmpPw := filepath.Join(e.Dir, ".initpw")
	if err := os.WriteFile(tmpPw, []byte(pw+"\n"), 0o600); err != nil {
		return err
	}
	if e.cred != nil {
		for _, p := range []string{e.Dir, tmpPw} {
			if err := os.Chown(p, int(e.cred.Uid), int(e.cred.Gid)); err != nil {
				return fmt.Errorf("embedded postgres: chown: %w", err)
			}
		}
		// The postgres account must be able to reach the folder.
		if err := allowTraverse(filepath.Dir(e.Dir)); err != nil {
			return err
		}
	}
	// initdb wants an empty folder: move the password file aside meanwhile.
	outside, err := os.CreateTemp("", "weft-initpw-")
	if err != nil {
		return err
	}
	outside.Close()
	if err := os.Rename(tmpPw, outside.Name()); err != nil {
		return err
	}
	defer os.Remove(outside.Name())
	if e.cred != nil {
		_ = os.Chown(outside.Name(), int(e.cred.Uid), int(e.cred.Gid))
	}
	if err := e.run(ctx, "initdb", "-D", e.Dir, "-U", "weft", "--auth=scram-sha-256",
		"--pwfile="+outside.Name(), "-E", "UTF8", "--locale=C.UTF-8"); err != nil {
		return fmt.Errorf("embedded postgres: initdb: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	conf := fmt.Sprintf("\n# written by weft\nlisten_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = ''\nmax_connections = 200\nshared_buffers = 128MB\n", port)
	f, err := os.OpenFile(filepath.Join(e.Dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// The weft database and its role are made on start (ensureAppRole).
	return nil
}

// run executes one of the server's programs, as the postgres account when
// Weft is root, with the password available to psql.
func (e *Embedded) run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(e.bin, prog), args...)
	if prog == "psql" {
		pw, _ := os.ReadFile(e.Dir + ".password")
		cmd.Env = append(os.Environ(), "PGPASSWORD="+strings.TrimSpace(string(pw)))
		cmd.Path = psqlPath(e.bin)
	}
	if e.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.cred}
		cmd.Dir = "/"
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", prog, err, strings.TrimSpace(out.String()))
	}
	return nil
}

func psqlPath(bin string) string {
	if p := filepath.Join(bin, "psql"); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath("psql"); err == nil {
		return p
	}
	return filepath.Join(bin, "psql")
}

// findPostgresBin returns the newest installed server's bin folder, or the
// folder of pg_ctl on PATH.
func findPostgresBin() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool { return pgMajor(matches[i]) > pgMajor(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("embedded postgres: no PostgreSQL server found; run `scripts/deps.sh run` as root (or `apt-get install postgresql`), or set DATABASE_URL")
}

func pgMajor(initdbPath string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdbPath))))
	return v
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("embedded postgres: running as root needs the 'postgres' system account (installed with Debian's postgresql package)")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// allowTraverse makes every folder from dir up to / searchable by others,
// which a cluster owned by the postgres account needs when Weft runs as root.
func allowTraverse(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
				return fmt.Errorf("embedded postgres: make %s reachable: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func configuredPort(dir string) (int, error) {
	body, err := os.ReadFile(filepath.Join(dir, "postgresql.conf"))
	if err != nil {
		return 0, fmt.Errorf("embedded postgres: %w", err)
	}
	port := 0
	for _, line := range strings.Split(string(body), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "port" {
			v, _, _ = strings.Cut(v, "#")
			port, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if port == 0 {
		return 0, fmt.Errorf("embedded postgres: no port in %s", filepath.Join(dir, "postgresql.conf"))
	}
	return port, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
