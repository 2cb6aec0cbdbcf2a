package visit

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
)

// Sandbox is the bubblewrap that contains each visit.
type Sandbox struct {
	Program string   `json:"program"` // absolute path of bwrap
	Version string   `json:"version"` // its --version
	Flags   []string `json:"flags"`   // the namespace and filesystem flags every visit gets
}

// Record is what a stage records of its sandbox; nil for none.
func (s *Sandbox) Record() *artifacts.Sandbox {
	if s == nil {
		return nil
	}
	return &artifacts.Sandbox{Program: s.Program, Version: s.Version, Flags: s.Flags}
}

// Inside paths: what a timer sees.
const (
	InsideRoot = "/visit"
	InsideOut  = "/visit/out"
	InsideBin  = "/visit/bin"
	// InsideCache is a process entry's fresh copy of its cache files
	// (artifacts.Prepared.Data), writable, checked by replay after the visit.
	InsideCache = "/visit/cache"
)

// nsFlags: every namespace bubblewrap can unshare (user, ipc, pid, net,
// uts, cgroup), everything killed when bwrap's parent dies, a new session
// (no terminal). fsFlags: fresh /proc and /dev, a private /tmp.
var (
	nsFlags = []string{"--unshare-all", "--die-with-parent", "--new-session"}
	fsFlags = []string{"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"}
)

// Bind is one path made visible: Src outside, Dst inside.
type Bind struct{ Src, Dst string }

// Mounts is what one sandbox shows besides /proc, /dev and /tmp.
type Mounts struct {
	// System: the whole file system read-only (a route build needs its
	// compilers), /tmp included, minus Hide; a visit gets only its closure
	// and a private /tmp instead.
	System   bool
	Hide     []string // directories replaced by an empty tmpfs
	ReadOnly []Bind   // directories (the closure's) and files (program, inputs, visit file)
	Writable []Bind   // the output directory
	Links    []Bind   // symlinks: Src is the target, Dst the link
	// Devices are character devices shown as they are (--dev-bind): a
	// GPU visit's alone (GPUDevices); the sandbox's fresh /dev is what
	// keeps the GPU from every other visit.
	Devices []string
}

// gpuDeviceNames are the device nodes a CUDA program opens: the GPUs, the
// control node and unified memory's two (docs/results/2026-12-01-gpu-sandbox:
// enough on the H200; /dev/nvidia-caps was not needed).
var gpuDeviceNames = []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}

// GPUDevices lists this machine's NVIDIA character devices under dev
// ("/dev"): every GPU node (nvidia0, nvidia1, ...) and the three nodes
// every CUDA program opens. An error names what is missing.
func GPUDevices(dev string) ([]string, error) {
	ents, err := os.ReadDir(dev)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "nvidia") && len(n) > len("nvidia") && strings.Trim(n[len("nvidia"):], "0123456789") == "" {
			out = append(out, filepath.Join(dev, n))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no NVIDIA GPU device (nvidia0, ...)", dev)
	}
	for _, n := range gpuDeviceNames {
		out = append(out, filepath.Join(dev, n))
	}
	for _, p := range out {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("GPU device %s: %w", p, err)
		}
		if fi.Mode()&os.ModeCharDevice == 0 {
			return nil, fmt.Errorf("GPU device %s: not a character device", p)
		}
	}
	return out, nil
}

// Probe finds bwrap (path "" means on PATH) and checks that it can make a
// sandbox on this machine: the answer to "can replay contain its visits here".
func Probe(ctx context.Context, path string) (*Sandbox, error) {
	if path == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return nil, fmt.Errorf("bwrap not found on PATH (Debian package bubblewrap; make deps installs it)")
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, abs, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %v", abs, err)
	}
	s := &Sandbox{Program: abs, Version: strings.TrimSpace(string(out)), Flags: slices.Concat(nsFlags, fsFlags)}
	argv := s.Argv(Mounts{System: true}, "/", []string{"/bin/true"})
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = []string{}
	if msg, err := c.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s cannot make a sandbox here: %v: %s", abs, err, strings.TrimSpace(string(msg)))
	}
	return s, nil
}

// Argv is the bwrap command line that runs timer with the mounts, in dir.
func (s *Sandbox) Argv(m Mounts, dir string, timer []string) []string {
	argv := append([]string{s.Program}, nsFlags...)
	if m.System {
		// /tmp stays the host's, read-only: route programs and their tools
		// may live there (a CI clone); a build writes in its Hide tmpfs.
		argv = append(argv, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev")
	} else {
		argv = append(argv, fsFlags...)
	}
	for _, h := range m.Hide {
		argv = append(argv, "--tmpfs", h)
	}
	for _, l := range m.Links {
		argv = append(argv, "--symlink", l.Src, l.Dst)
	}
	for _, b := range m.ReadOnly {
		argv = append(argv, "--ro-bind", b.Src, b.Dst)
	}
	for _, b := range m.Writable {
		argv = append(argv, "--bind", b.Src, b.Dst)
	}
	for _, d := range m.Devices {
		argv = append(argv, "--dev-bind", d, d)
	}
	argv = append(argv, "--chdir", dir, "--")
	return append(argv, timer...)
}

// Wrap runs argv in a sandbox that shows the whole file system read-only
// except hide (each replaced by an empty, private, writable tmpfs) and the
// writable binds, with the read-only binds on top (a stage's scratch files
// the command needs): how route builds and closure listings run. devices
// are shown as they are: the GPU's nodes (GPUDevices) for route code of a
// cuda case, nothing otherwise. A nil sandbox (--no-sandbox) returns argv
// unchanged.
func (s *Sandbox) Wrap(hide []string, ro, rw []Bind, devices []string, dir string, argv []string) []string {
	if s == nil {
		return argv
	}
	return s.Argv(Mounts{System: true, Hide: hide, ReadOnly: ro, Writable: rw, Devices: devices}, dir, argv)
}

// CaseDevices is what route code of a case may open besides the sandbox's
// own /dev: this machine's GPU nodes for a cuda case (a build that probes
// the GPU, a closure listing that initialises CUDA), none for a CPU case.
// A machine without a GPU shows none, and the route says what it lacks
// ("CUDA unavailable: ..."); the error is why, for the record.
type CaseDevices struct {
	Dev   string // where to look: "" is /dev
	once  sync.Once
	nodes []string
	err   error
}

// For returns the device nodes for a case, cuda when it runs on the GPU.
func (d *CaseDevices) For(cuda bool) []string {
	if !cuda {
		return nil
	}
	d.once.Do(func() {
		dev := d.Dev
		if dev == "" {
			dev = "/dev"
		}
		d.nodes, d.err = GPUDevices(dev)
	})
	return d.nodes
}

// ClosureMounts makes the mounts of a timer whose closure (the files it
// maps and imports, absolute paths) is closure and whose executable (the
// harness, or the interpreter of a process route) is exe: the smallest set
// of directories that holds every closure file, read-only, plus what the
// dynamic loader looks up on the way to them (/etc/ld.so.cache,
// /etc/alternatives, the symlinks at / and on the path of exe's ELF
// interpreter), and the symlinks on the path of exe itself (a virtual
// environment's bin/python3), so exe is run by the same name inside.
func ClosureMounts(closure []string, exe string) Mounts {
	m := Mounts{ReadOnly: systemBinds(closure)}
	m.Links = rootLinks()
	chain := linkChain(exe)
	if interp := elfInterp(exe); interp != "" {
		chain = append(chain, linkChain(interp)...)
	}
	for _, l := range chain {
		if !slices.Contains(m.Links, l) {
			m.Links = append(m.Links, l)
		}
	}
	return m
}

// systemBinds is the cover of paths' directories plus the loader's files.
func systemBinds(paths []string) []Bind {
	var dirs []string
	for _, p := range paths {
		dirs = append(dirs, filepath.Dir(p))
	}
	var out []Bind
	for _, d := range coverDirs(dirs) {
		out = append(out, Bind{d, d})
	}
	for _, f := range []string{"/etc/ld.so.cache", "/etc/alternatives"} {
		if _, err := os.Stat(f); err == nil && !slices.ContainsFunc(out, func(b Bind) bool { return within(f, b.Src) }) {
			out = append(out, Bind{f, f})
		}
	}
	return out
}

// coverDirs drops every directory that lies inside another one of dirs.
func coverDirs(dirs []string) []string {
	sort.Strings(dirs)
	var out []string
	for _, d := range slices.Compact(dirs) {
		if len(out) > 0 && within(d, out[len(out)-1]) {
			continue
		}
		out = append(out, d)
	}
	return out
}

func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// rootLinks are the symlinks at / (merged-/usr systems: /lib -> usr/lib).
func rootLinks() []Bind {
	var out []Bind
	for _, n := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if t, err := os.Readlink(n); err == nil {
			out = append(out, Bind{t, n})
		}
	}
	return out
}

// linkChain lists the symlinks met while resolving p, component by
// component, so the same path resolves inside the sandbox.
func linkChain(p string) []Bind {
	var out []Bind
	for hops := 0; hops < 40; hops++ {
		parts := strings.Split(strings.TrimPrefix(filepath.Clean(p), "/"), "/")
		cur, moved := "/", false
		for i, part := range parts {
			next := filepath.Join(cur, part)
			t, err := os.Readlink(next)
			if err != nil {
				cur = next
				continue
			}
			out = append(out, Bind{t, next})
			if !filepath.IsAbs(t) {
				t = filepath.Join(cur, t)
			}
			p, moved = filepath.Join(append([]string{t}, parts[i+1:]...)...), true
			break
		}
		if !moved {
			return out
		}
	}
	return out
}

// elfInterp is exe's PT_INTERP (the dynamic loader it names), or "".
func elfInterp(exe string) string {
	f, err := elf.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return ""
			}
			return strings.TrimRight(string(b), "\x00")
		}
	}
	return ""
}
