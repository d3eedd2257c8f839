package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// systemDirs are bound read-only into the command's root (or, on merged
// /usr systems, recreated as the symbolic links they are).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// devFiles are the device files a command gets.
var devFiles = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// buildRoot makes the command's file system — what bubblewrap would: a
// read-only tmpfs holding only the system folders (bound read-only), a
// few files of /etc, the usual device files, a private /proc and /tmp and
// the workspace, bound read-write at its own path — and pivots into it,
// detaching the old root, so that nothing else exists for the command:
// not the data directory, not other workspaces, not the server's /tmp.
// Landlock, applied after, is then a second wall over the same paths.
// ws is the workspace, held open (a tmpfs is mounted over /tmp here).
func buildRoot(l limits, ws int) error {
	const r = "/tmp" // private to this mount namespace; covered by the new root
	if err := syscall.Mount("tmpfs", r, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=1m,nr_inodes=4096,mode=755"); err != nil {
		return fmt.Errorf("mount the new root: %w", err)
	}
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, r+d); err != nil {
				return err
			}
		case fi.IsDir():
			if err := bindRO(d, r+d, true); err != nil {
				return err
			}
		}
	}
	for _, f := range etcFiles {
		fi, err := os.Stat(f)
		if err != nil {
			continue
		}
		if err := bindRO(f, r+f, fi.IsDir()); err != nil {
			return err
		}
	}
	if err := os.Mkdir(r+"/dev", 0o755); err != nil {
		return err
	}
	for _, f := range devFiles {
		if _, err := os.Stat(f); err != nil {
			continue
		}
		if err := bind(f, r+f, false); err != nil {
			return err
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, r+"/dev/"+name); err != nil {
			return err
		}
	}
	if err := os.Mkdir(r+"/tmp", 0o1777); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", r+"/tmp", "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV,
		fmt.Sprintf("size=%d,nr_inodes=16384,mode=1777", l.fsize)); err != nil {
		return fmt.Errorf("mount a private /tmp: %w", err)
	}
	// /proc is mounted before the pivot: a user namespace may mount a proc
	// only where one is fully visible already.
	if err := os.Mkdir(r+"/proc", 0o555); err != nil {
		return err
	}
	if err := syscall.Mount("proc", r+"/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount a private /proc: %w", err)
	}
	if err := bind(fmt.Sprintf("/proc/self/fd/%d", ws), r+l.dir, true); err != nil {
		return fmt.Errorf("bind the workspace: %w", err)
	}
	if err := configReadOnly(r + l.dir); err != nil {
		return err
	}
	if err := syscall.Mount("", r, "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make the new root read-only: %w", err)
	}
	if err := syscall.Chdir(r); err != nil {
		return err
	}
	if err := syscall.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	// The old root is now stacked on the new one: detach it.
	if err := syscall.Unmount(".", syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	return syscall.Chdir("/")
}

// ConfigDir is the workspace's configuration folder (its skills). A
// command sees it read-only, as the file tools never change it: a command
// steered by a hostile document cannot plant a skill that later runs list
// in their prompt. It is made (empty) when missing, so that a command
// cannot make it either; a .weft that is not a folder (a link) stops the
// command, since a link's target would stay writable.
const ConfigDir = ".weft"

// ErrConfigNotDir: the workspace's .weft is not a folder.
var errConfigNotDir = errors.New("the workspace's " + ConfigDir + " is not a folder (a link or a file): " +
	"commands do not run until it is a folder again or removed")

// configReadOnly binds the workspace's configuration folder (ws/.weft)
// read-only over itself.
func configReadOnly(ws string) error {
	dir := ws + "/" + ConfigDir
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("make the workspace's %s: %w", ConfigDir, err)
		}
		if fi, err = os.Lstat(dir); err != nil {
			return err
		}
		if !fi.IsDir() {
			return errConfigNotDir
		}
	case err != nil:
		return err
	case !fi.IsDir():
		return errConfigNotDir
	}
	return bindRO(dir, dir, true)
}

// bind binds src onto dst, creating dst (a folder or an empty file).
func bind(src, dst string, dir bool) error {
	if dir {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}

// bindRO binds src onto dst read-only, keeping the flags the source's
// mount has (a user namespace may not clear them).
func bindRO(src, dst string, dir bool) error {
	if err := bind(src, dst, dir); err != nil {
		return err
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dst, &st); err != nil {
		return err
	}
	const (
		stNosuid      = 0x2
		stNodev       = 0x4
		stNoexec      = 0x8
		stNoatime     = 0x400
		stNodiratime  = 0x800
		stRelatime    = 0x1000
		msRelatime    = 1 << 21
		msNodiratime  = 0x800
		msNoatime     = 0x400
		remountFlags  = syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_RDONLY
		flagsFromStat = stNosuid | stNodev | stNoexec
	)
	flags := uintptr(remountFlags) | uintptr(st.Flags&flagsFromStat) // ST_ and MS_ agree on these
	if st.Flags&stNoatime != 0 {
		flags |= msNoatime
	}
	if st.Flags&stNodiratime != 0 {
		flags |= msNodiratime
	}
	if st.Flags&stRelatime != 0 {
		flags |= msRelatime
	}
	if err := syscall.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", src, err)
	}
	return nil
}
