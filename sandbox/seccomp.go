package sandbox

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"
)

// The seccomp filter closes what the namespaces and Landlock leave open:
//
//   - user namespaces: a new one gives back every capability inside it
//     (its bounding set is full again), and with CAP_NET_ADMIN over a
//     network namespace of its own a command reaches nf_tables, raw
//     sockets and the rest of the kernel's namespaced-root surface — the
//     way most kernel privilege escalations start. unshare and clone with
//     CLONE_NEWUSER are refused; clone3, whose flags a filter cannot read,
//     answers ENOSYS, and the C library falls back to clone;
//   - socket families other than UNIX, IPv4, IPv6 and netlink: AF_VSOCK is
//     not isolated by network namespaces (a VM's host and guest agents
//     listen there), AF_PACKET, AF_ALG, Bluetooth and the rest are only
//     attack surface here;
//   - the kernel's keyrings (keyctl, add_key, request_key): not
//     namespaced, the command would hold the server's session keyring;
//   - set-user-ID and set-group-ID bits (chmod, open, mknod): the
//     command's uid is the server's, root here, so a set-user-ID file it
//     left in the workspace would be a root shell for whoever can reach
//     the folder on the host; io_uring, whose operations bypass this
//     filter, and openat2, whose mode it cannot read, answer ENOSYS;
//   - fallocate, but to punch holes: it allocates disk past RLIMIT_FSIZE
//     (FALLOC_FL_KEEP_SIZE) or faster than the disk watchdog looks;
//   - userfaultfd and perf_event_open: no use to a shell, and favourite
//     tools of kernel exploits (to win races, to read the kernel's state);
//   - system calls of another ABI (32-bit, x32), whose numbers the filter
//     does not check: ENOSYS.
//
// It is installed last, on the thread that execs the shell.

// seccompArch is what the filter needs of one architecture.
type seccompArch struct {
	audit uint32 // AUDIT_ARCH_*
	x32   bool   // numbers from 0x40000000 are another ABI's
	// denied answer errno whatever their arguments.
	denied []deniedCall
	// modeArg: system calls whose argument arg is a file mode, refused
	// with a set-user-ID or set-group-ID bit in it.
	modeArg []argCall
	// newUser: system calls whose first argument holds clone flags.
	newUser   []uint32
	fallocate uint32
	socket    uint32
}

type deniedCall struct {
	nr    uint32
	errno syscall.Errno
}

type argCall struct {
	nr  uint32
	arg int
}

// Numbers common to every architecture.
const (
	sysIOUringSetup    = 425
	sysIOUringEnter    = 426
	sysIOUringRegister = 427
	sysClone3          = 435
	sysOpenat2         = 437
	sysFchmodat2       = 452
)

var common = []deniedCall{
	// clone3's flags are in memory a filter cannot read: ENOSYS, and the
	// C library falls back to clone.
	{sysClone3, syscall.ENOSYS},
	// openat2's mode likewise; the C library does not use it.
	{sysOpenat2, syscall.ENOSYS},
	// io_uring's operations do not pass through this filter (its openat
	// takes a mode).
	{sysIOUringSetup, syscall.ENOSYS}, {sysIOUringEnter, syscall.ENOSYS}, {sysIOUringRegister, syscall.ENOSYS},
}

// seccompArches are the architectures the filter knows; on any other the
// command runs without it (the walls say so).
var seccompArches = map[string]seccompArch{
	"amd64": {
		audit: 0xc000003e, x32: true,
		// keyctl, add_key, request_key, userfaultfd, perf_event_open
		denied: append([]deniedCall{{250, syscall.EPERM}, {248, syscall.EPERM}, {249, syscall.EPERM}, {323, syscall.EPERM}, {298, syscall.EPERM}}, common...),
		// open, creat, openat, chmod, fchmod, fchmodat, fchmodat2, mknod, mknodat
		modeArg:   []argCall{{2, 2}, {85, 1}, {257, 3}, {90, 1}, {91, 1}, {268, 2}, {sysFchmodat2, 2}, {133, 1}, {259, 2}},
		newUser:   []uint32{272, 56}, // unshare, clone
		fallocate: 285,
		socket:    41,
	},
	"arm64": {
		audit:     0xc00000b7,
		denied:    append([]deniedCall{{219, syscall.EPERM}, {217, syscall.EPERM}, {218, syscall.EPERM}, {282, syscall.EPERM}, {241, syscall.EPERM}}, common...),
		modeArg:   []argCall{{56, 3}, {52, 1}, {53, 2}, {sysFchmodat2, 2}, {33, 2}}, // openat, fchmod, fchmodat, fchmodat2, mknodat
		newUser:   []uint32{97, 220},
		fallocate: 47,
		socket:    198,
	},
}

const (
	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
	afVsock   = 40 // only for the probe

	cloneNewUser    = 0x10000000
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
	setID           = 0o6000 // S_ISUID | S_ISGID

	secRetAllow = 0x7fff0000
	secRetErrno = 0x00050000

	// Offsets in struct seccomp_data; the low 32 bits of an argument on
	// these little-endian architectures.
	offNr   = 0
	offArch = 4
	offArg0 = 16
)

// BPF opcodes.
const (
	bpfLdW   = syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS
	bpfJeqK  = syscall.BPF_JMP | syscall.BPF_JEQ | syscall.BPF_K
	bpfJgeK  = syscall.BPF_JMP | syscall.BPF_JGE | syscall.BPF_K
	bpfJsetK = syscall.BPF_JMP | syscall.BPF_JSET | syscall.BPF_K
	bpfRetK  = syscall.BPF_RET | syscall.BPF_K
)

// seccompProgram is the filter for a. Each block tests one system call
// number and ends in returns, so every jump is short and local.
func seccompProgram(a seccompArch) []syscall.SockFilter {
	stmt := func(code uint16, k uint32) syscall.SockFilter { return syscall.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) syscall.SockFilter {
		return syscall.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
	}
	errno := func(e syscall.Errno) syscall.SockFilter { return stmt(bpfRetK, secRetErrno|uint32(e)) }
	allow := stmt(bpfRetK, secRetAllow)
	// refuseIf refuses nr when its argument arg has a bit of mask.
	refuseIf := func(nr uint32, arg int, mask uint32, e syscall.Errno) []syscall.SockFilter {
		return []syscall.SockFilter{
			jump(bpfJeqK, nr, 0, 4),
			stmt(bpfLdW, uint32(offArg0+8*arg)),
			jump(bpfJsetK, mask, 0, 1),
			errno(e),
			allow,
		}
	}
	p := []syscall.SockFilter{
		stmt(bpfLdW, offArch),
		jump(bpfJeqK, a.audit, 1, 0),
		errno(syscall.ENOSYS), // another ABI (32-bit)
		stmt(bpfLdW, offNr),
	}
	if a.x32 {
		p = append(p, jump(bpfJgeK, 0x40000000, 0, 1), errno(syscall.ENOSYS))
	}
	for _, d := range a.denied {
		p = append(p, jump(bpfJeqK, d.nr, 0, 1), errno(d.errno))
	}
	for _, nr := range a.newUser {
		p = append(p, refuseIf(nr, 0, cloneNewUser, syscall.EPERM)...)
	}
	for _, c := range a.modeArg {
		p = append(p, refuseIf(c.nr, c.arg, setID, syscall.EPERM)...)
	}
	// fallocate only punches holes: FALLOC_FL_KEEP_SIZE allocates past
	// RLIMIT_FSIZE (1 GB in 5 ms, measured), and even a plain one
	// allocates faster than the disk watchdog looks (the C library's
	// posix_fallocate then writes instead).
	p = append(p,
		jump(bpfJeqK, a.fallocate, 0, 4),
		stmt(bpfLdW, offArg0+8), // mode
		jump(bpfJeqK, fallocPunchHole|fallocKeepSize, 1, 0),
		errno(syscall.EOPNOTSUPP),
		allow,
	)
	return append(p,
		jump(bpfJeqK, a.socket, 0, 7),
		stmt(bpfLdW, offArg0), // the family
		jump(bpfJeqK, afUnix, 3, 0),
		jump(bpfJeqK, afInet, 2, 0),
		jump(bpfJeqK, afInet6, 1, 0),
		jump(bpfJeqK, afNetlink, 0, 1),
		allow,
		errno(syscall.EAFNOSUPPORT),
		allow,
	)
}

// installSeccomp puts the filter on the calling thread (the one that
// execs); no_new_privs must be set already (Landlock sets it). It reports
// false when this architecture has no filter.
func installSeccomp() (bool, error) {
	arch, ok := seccompArches[runtime.GOARCH]
	if !ok {
		return false, nil
	}
	const (
		prSetSeccomp      = 22
		seccompModeFilter = 2
	)
	prog := seccompProgram(arch)
	fprog := syscall.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetSeccomp, seccompModeFilter, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return false, fmt.Errorf("seccomp: %w", e)
	}
	runtime.KeepAlive(prog)
	return true, nil
}
