package extract

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
)

// childArg is argv[1] of a jail's child.
const childArg = "__weft-extract"

// Operations of the child, argv[2].
const (
	opRead  = "read"  // format maxText maxUnzipped maxPages: JSON []Block
	opThumb = "thumb" // maxSide: PNG bytes
)

// The child's answer on stdout: a status byte, then the result (JSON
// blocks, PNG bytes) or a JSON childError.
const (
	statusOK  = 'K'
	statusErr = 'E'
)

// maxChildInput bounds what a child reads from stdin: more than any
// upload limit Weft allows.
const maxChildInput = 1 << 30

// childOps are the operations a child runs, by name; tests add their own.
var childOps = map[string]func(data []byte, args []string) ([]byte, error){
	opRead:  childRead,
	opThumb: childThumb,
}

// ChildMain runs the jail's child and exits when the process was started
// as one (argv[1] is the internal subcommand); otherwise it returns at
// once. main, and every test binary whose tests reach the jail (through
// internal/testenv.Main or their own TestMain), call it first.
func ChildMain() {
	if len(os.Args) < 2 || os.Args[1] != childArg {
		return
	}
	os.Exit(child(os.Args[2:]))
}

// child confines itself, then reads stdin and answers. Arguments: op,
// memory (bytes over the start), CPU seconds, then op's own.
func child(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "extract child: missing arguments")
		return 2
	}
	op, ok := childOps[args[0]]
	mem, err1 := strconv.ParseInt(args[1], 10, 64)
	cpu, err2 := strconv.ParseUint(args[2], 10, 64)
	if !ok || err1 != nil || err2 != nil || mem <= 0 || cpu == 0 {
		fmt.Fprintln(os.Stderr, "extract child: bad arguments")
		return 2
	}
	if err := confine(mem, cpu); err != nil {
		fmt.Fprintln(os.Stderr, "extract child:", err)
		return 3
	}
	data, err := io.ReadAll(io.LimitReader(os.Stdin, maxChildInput))
	if err != nil {
		fmt.Fprintln(os.Stderr, "extract child: stdin:", err)
		return 2
	}
	out, err := op(data, args[3:])
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	if err != nil {
		w.WriteByte(statusErr)
		json.NewEncoder(w).Encode(encodeChildError(err))
	} else {
		w.WriteByte(statusOK)
		w.Write(out)
	}
	if err := w.Flush(); err != nil {
		return 2
	}
	return 0
}

// confine sets the child's limits before it reads a byte of the file:
//
//   - RLIMIT_AS: the address space at start plus mem. A Go program
//     reserves about 1.2 GB of address space before main (the page
//     allocator's index, mostly never touched), so the limit is relative
//     to what is reserved now; mem is then what the file may cost.
//   - debug.SetMemoryLimit at 3/4 of mem: the GC works hard before the
//     hard limit turns an allocation into "out of memory".
//   - debug.SetMaxStack 64 MB: a recursion on a nested document ends as
//     a stack overflow long before it has eaten the memory.
//   - RLIMIT_CPU: cpu seconds, then the kernel kills it (SIGKILL at the
//     hard limit; Go ignores SIGXCPU).
//   - RLIMIT_NOFILE 16 (stdin, stdout, stderr and the runtime's own),
//     RLIMIT_FSIZE 0 (it writes no file), RLIMIT_NPROC is left alone (it
//     counts the user's processes, not the child's).
//   - GOMAXPROCS 1: one core per child, Workers children at most.
//   - Landlock (best effort): no file system access at all and no TCP
//     bind or connect (UDP too on ABI 10+, and no signals or abstract
//     sockets out of its domain on ABI 6+). Kernels without Landlock run
//     the child with the rlimits only; the parent logs that once.
func confine(mem int64, cpu uint64) error {
	runtime.GOMAXPROCS(1)
	base, err := addressSpace()
	if err != nil {
		return err
	}
	limits := []struct {
		res int
		cur uint64
	}{
		{syscall.RLIMIT_AS, base + uint64(mem)},
		{syscall.RLIMIT_CPU, cpu},
		{syscall.RLIMIT_NOFILE, 16},
		{syscall.RLIMIT_FSIZE, 0},
		{syscall.RLIMIT_CORE, 0},
	}
	for _, l := range limits {
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: l.cur, Max: l.cur}); err != nil {
			return fmt.Errorf("setrlimit %d: %w", l.res, err)
		}
	}
	debug.SetMemoryLimit(mem / 4 * 3)
	debug.SetMaxStack(64 << 20)
	if err := landlock.V11.BestEffort().Restrict(); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// addressSpace is the process's current virtual size in bytes.
func addressSpace() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmSize in /proc/self/status")
}

func childRead(data []byte, args []string) ([]byte, error) {
	if len(args) != 4 {
		return nil, fmt.Errorf("read: bad arguments")
	}
	maxText, _ := strconv.Atoi(args[1])
	maxUnzipped, _ := strconv.ParseInt(args[2], 10, 64)
	maxPages, _ := strconv.Atoi(args[3])
	blocks, err := ReadInProcess(context.Background(), args[0], data,
		Limits{MaxText: maxText, MaxUnzipped: maxUnzipped, MaxPages: maxPages})
	if err != nil {
		return nil, err
	}
	if blocks == nil {
		blocks = []Block{}
	}
	return json.Marshal(blocks)
}

func childThumb(data []byte, args []string) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("thumb: bad arguments")
	}
	side, _ := strconv.Atoi(args[0])
	return ThumbnailInProcess(data, side)
}
