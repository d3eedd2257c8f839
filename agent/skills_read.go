// Reading skills from disk: the skills folders, each skill's SKILL.md and
// the files beside it, always through an *os.Root.

package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// instance opens the instance skills folder (nil: there is none).
func (s *Skills) instance() *os.Root {
	if s.dir == "" {
		return nil
	}
	r, err := os.OpenRoot(s.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			slog.Warn("skills: open the instance skills folder", "dir", s.dir, "err", err)
		}
		return nil
	}
	return r
}

// workspaceSkills opens a workspace's skills folder, inside the workspace
// (nil: there is none).
func workspaceSkills(root string) *os.Root {
	if root == "" {
		return nil
	}
	ws, err := os.OpenRoot(root)
	if err != nil {
		return nil
	}
	defer ws.Close()
	r, err := ws.OpenRoot(filepath.FromSlash(WorkspaceSkillsDir))
	if err != nil {
		return nil
	}
	return r
}

// scanSkills reads the skills of one skills folder and closes it. Every
// folder in it is a skill, valid or not; other entries are ignored.
func (s *Skills) scanSkills(base *os.Root, origin string) []Skill {
	if base == nil {
		return nil
	}
	defer base.Close()
	d, err := base.Open(".")
	if err != nil {
		return nil
	}
	entries, _ := d.ReadDir(maxSkillScan)
	d.Close()
	var out []Skill
	for _, e := range entries {
		name := e.Name()
		sk := Skill{Name: name, Origin: origin}
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			sk.Problem = "It is a symbolic link: a skill must be a folder of its own."
		case !e.IsDir():
			continue
		case !ValidSkillName(name):
			sk.Name = clip(strings.ToValidUTF8(name, "?"), maxSkillNameBytes)
			sk.Problem = "Its folder name is not a skill name: use 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit."
		default:
			sk.Description, sk.Problem = s.seen.load(base, name)
		}
		out = append(out, sk)
	}
	return out
}

// loadSkill reads and checks one skill's SKILL.md: its description and
// body, or the problem that makes it unusable.
func loadSkill(base *os.Root, folder string) (description, body, problem string) {
	dir, err := base.OpenRoot(folder)
	if err != nil {
		return "", "", "Its folder cannot be opened."
	}
	defer dir.Close()
	data, err := readSkillFile(dir, "SKILL.md")
	if err != nil {
		var te *ToolError
		if errors.As(err, &te) {
			return "", "", te.Msg
		}
		return "", "", "Its SKILL.md cannot be read."
	}
	fm, body, err := parseSkill(data)
	if err != nil {
		return "", "", err.Error()
	}
	if fm.name != "" && fm.name != folder {
		return "", "", fmt.Sprintf("Its front matter names it %q, but its folder is %q: the two must match.", clip(fm.name, maxSkillNameBytes), folder)
	}
	desc := strings.Join(strings.Fields(fm.description), " ")
	if desc == "" {
		return "", "", "Its front matter has no description: the agent chooses skills by their descriptions."
	}
	return clipBytes(desc, maxSkillDescBytes), body, ""
}

// readSkillFile reads a text file of a skill folder, at most maxSkillBytes,
// never through a symbolic link leading out of the folder.
func readSkillFile(dir *os.Root, rel string) ([]byte, error) {
	f, fi, err := openRegular(dir, rel)
	if err != nil {
		if errorsEscape(err) {
			return nil, Errorf("%s leads outside the skill's folder.", rel)
		}
		return nil, err
	}
	defer f.Close()
	tooBig := Errorf("%s is over the %d KiB limit of a skill file.", rel, maxSkillBytes>>10)
	if fi.Size() > maxSkillBytes {
		return nil, tooBig
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSkillBytes+1))
	if err != nil {
		return nil, Errorf("%s cannot be read.", rel)
	}
	if len(data) > maxSkillBytes {
		return nil, tooBig
	}
	if isBinary(data) {
		return nil, Errorf("%s is not a text file.", rel)
	}
	return []byte(strings.ToValidUTF8(string(data), "\uFFFD")), nil
}

// errorsEscape recognizes fileError's text for an escape (openRegular has
// already turned os.Root's refusal into a *ToolError).
func errorsEscape(err error) bool {
	var te *ToolError
	return errors.As(err, &te) && strings.HasPrefix(te.Msg, errOutside)
}

// skillCache keeps what each SKILL.md said (its description, or why it
// cannot be used) by the file's identity — device, inode, size, change
// and modification times — so that an edit, a replacement or a touch
// reads it again. The skills list is assembled for every model request of
// a run: reading and checking 100 SKILL.md of 250 KiB took ~90 ms each
// time.
type skillCache struct {
	mu sync.Mutex
	m  map[skillKey]skillSeen
}

type skillKey struct {
	folder             string
	dev, ino           uint64
	size, mtime, ctime int64
}

type skillSeen struct{ description, problem string }

// maxSkillCache bounds the cache (every workspace's skills and the
// instance's): past it, it starts afresh.
const maxSkillCache = 4096

// load is loadSkill's description and problem, from the cache when the
// skill's SKILL.md is the file it was read from.
func (c *skillCache) load(base *os.Root, folder string) (description, problem string) {
	key, ok := skillFileKey(base, folder)
	if !ok {
		description, _, problem = loadSkill(base, folder)
		return description, problem
	}
	c.mu.Lock()
	v, hit := c.m[key]
	c.mu.Unlock()
	if hit {
		return v.description, v.problem
	}
	description, _, problem = loadSkill(base, folder)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxSkillCache {
		c.m = map[skillKey]skillSeen{}
	}
	c.m[key] = skillSeen{description, problem}
	c.mu.Unlock()
	return description, problem
}

// skillFileKey identifies folder/SKILL.md (ok is false when it cannot).
func skillFileKey(base *os.Root, folder string) (skillKey, bool) {
	dir, err := base.OpenRoot(folder)
	if err != nil {
		return skillKey{}, false
	}
	defer dir.Close()
	fi, err := dir.Stat("SKILL.md")
	if err != nil {
		return skillKey{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return skillKey{}, false
	}
	return skillKey{folder: folder, dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true
}
