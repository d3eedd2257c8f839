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
//   - system calls of another ABI (32-bit, x32), whose numbers the filter
//     does not check: ENOSYS.
//
// It is installed last, on the thread that execs the shell.

// auditArch is AUDIT_ARCH_* of the architectures the filter knows; on any
// other the command runs without it (the walls say so).
var auditArch = map[string]uint32{
	"amd64": 0xc000003e,
	"arm64": 0xc00000b7,
}

const (
	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
	afVsock   = 40 // only for the probe

	cloneNewUser = 0x10000000
	sysClone3    = 435 // the same on every Linux architecture

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

// seccompProgram is the filter for arch (an AUDIT_ARCH_* value).
func seccompProgram(arch uint32) []syscall.SockFilter {
	stmt := func(code uint16, k uint32) syscall.SockFilter { return syscall.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) syscall.SockFilter {
		return syscall.SockFilter{Code: code, K: k, Jt: jt, Jf: jf}
	}
	errno := func(e syscall.Errno) syscall.SockFilter { return stmt(bpfRetK, secRetErrno|uint32(e)) }
	allow := stmt(bpfRetK, secRetAllow)
	// Each block ends in a return, so the jumps stay short and local.
	p := []syscall.SockFilter{
		stmt(bpfLdW, offArch),
		jump(bpfJeqK, arch, 1, 0),
		errno(syscall.ENOSYS), // another ABI
		stmt(bpfLdW, offNr),
		jump(bpfJgeK, 0x40000000, 0, 1), // x32's numbers
		errno(syscall.ENOSYS),
		jump(bpfJeqK, sysClone3, 0, 1),
		errno(syscall.ENOSYS),
		jump(bpfJeqK, syscall.SYS_KEYCTL, 2, 0),
		jump(bpfJeqK, syscall.SYS_ADD_KEY, 1, 0),
		jump(bpfJeqK, syscall.SYS_REQUEST_KEY, 0, 1),
		errno(syscall.EPERM),
		jump(bpfJeqK, syscall.SYS_UNSHARE, 1, 0),
		jump(bpfJeqK, syscall.SYS_CLONE, 0, 4),
		stmt(bpfLdW, offArg0), // the flags, for both
		jump(bpfJsetK, cloneNewUser, 0, 1),
		errno(syscall.EPERM),
		allow,
		jump(bpfJeqK, syscall.SYS_SOCKET, 0, 7),
		stmt(bpfLdW, offArg0), // the family
		jump(bpfJeqK, afUnix, 3, 0),
		jump(bpfJeqK, afInet, 2, 0),
		jump(bpfJeqK, afInet6, 1, 0),
		jump(bpfJeqK, afNetlink, 0, 1),
		allow,
		errno(syscall.EAFNOSUPPORT),
		allow,
	}
	return p
}

// installSeccomp puts the filter on the calling thread (the one that
// execs); no_new_privs must be set already (Landlock sets it). It reports
// false when this architecture has no filter.
func installSeccomp() (bool, error) {
	arch, ok := auditArch[runtime.GOARCH]
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
