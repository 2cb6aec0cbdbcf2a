package launch

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The cubin chain (docs/gpu.md, "The cubin chain"): prepare runs ptxas,
// which tilepipe finds and not the route, on the PTX a cubin build stored,
// with the flags its manifest declares, and refuses the build unless the
// stored cubin holds the same code as the one so built (SameCode). The
// route chooses its flags from PtxasFlags only: each changes what ptxas
// emits, none names a file or runs a program.
var PtxasFlags = []string{"-lineinfo", "-suppress-debug-info", "-v", "--fmad=false", "--fmad=true", "-O0", "-O1", "-O2", "-O3"}

// CheckPtxas says whether flags are ptxas flags a manifest may declare:
// each one of PtxasFlags, none twice.
func CheckPtxas(flags []string) error {
	if flags == nil {
		return fmt.Errorf("launch manifest: ptxas: want the flags ptxas built the cubin with from the PTX, beside --gpu-name (for example [\"-lineinfo\", \"-v\"]; [] for none): prepare builds it again")
	}
	for i, f := range flags {
		if !slices.Contains(PtxasFlags, f) {
			return fmt.Errorf("launch manifest: ptxas[%d]: %q is not one of %s", i, f, strings.Join(PtxasFlags, " "))
		}
		if slices.Index(flags, f) != i {
			return fmt.Errorf("launch manifest: ptxas[%d]: %q given twice", i, f)
		}
	}
	return nil
}

var targetRE = regexp.MustCompile(`(?m)^\s*\.target\s+(sm_[0-9]{2,3}a?)\b`)

// Target is the architecture a PTX module names in its .target directive
// (sm_90a for Triton 3.6 on an H200): what ptxas is asked to build for.
func Target(ptx []byte) (string, error) {
	m := targetRE.FindAllSubmatch(ptx, -1)
	switch {
	case len(m) == 0:
		return "", fmt.Errorf("ptx: no .target sm_NN directive")
	case len(m) > 1:
		return "", fmt.Errorf("ptx: %d .target directives, want one", len(m))
	}
	return string(m[0][1]), nil
}

// Debug reports whether a cubin section is debug information: DWARF and
// NVIDIA's line tables and embedded PTX text, with their relocations. The
// driver loads none of them, and ptxas writes the name of its input file
// into them, so two builds of one PTX differ there and nowhere else.
func Debug(name string) bool {
	for _, p := range []string{".debug_", ".nv_debug_"} {
		for _, r := range []string{"", ".rel", ".rela"} {
			if strings.HasPrefix(name, r+p) {
				return true
			}
		}
	}
	return false
}

// SameCode says whether two cubins hold the same code: the same ELF
// header (class, ABI, machine and the flags that carry the architecture),
// the same program headers, and every section that is not debug
// information (Debug) the same in order, name, type, flags, address,
// alignment, links and bytes. nil when they do; otherwise the first
// difference, by section name and byte.
func SameCode(captured, rebuilt []byte) error {
	a, va, err := openCubin(captured)
	if err != nil {
		return fmt.Errorf("the stored cubin: %v", err)
	}
	b, vb, err := openCubin(rebuilt)
	if err != nil {
		return fmt.Errorf("the rebuilt cubin: %v", err)
	}
	if va != vb {
		return fmt.Errorf("ELF version %d (the CUDA ABI), the rebuilt cubin's %d", va, vb)
	}
	ha, hb := a.FileHeader, b.FileHeader
	if ha.Class != hb.Class || ha.Data != hb.Data || ha.OSABI != hb.OSABI || ha.ABIVersion != hb.ABIVersion || ha.Type != hb.Type || ha.Machine != hb.Machine || ha.Entry != hb.Entry {
		return fmt.Errorf("ELF header: %+v, the rebuilt cubin's %+v", ha, hb)
	}
	if fa, fb := elfFlags(captured, a), elfFlags(rebuilt, b); fa != fb {
		return fmt.Errorf("ELF flags %#x (the architecture built for), the rebuilt cubin's %#x", fa, fb)
	}
	if len(a.Progs) != len(b.Progs) {
		return fmt.Errorf("%d program headers, the rebuilt cubin has %d", len(a.Progs), len(b.Progs))
	}
	for i := range a.Progs {
		pa, pb := a.Progs[i].ProgHeader, b.Progs[i].ProgHeader
		if pa.Type != pb.Type || pa.Flags != pb.Flags || pa.Vaddr != pb.Vaddr || pa.Filesz != pb.Filesz || pa.Memsz != pb.Memsz || pa.Align != pb.Align {
			return fmt.Errorf("program header %d: %+v, the rebuilt cubin's %+v", i, pa, pb)
		}
	}
	sa, sb := codeSections(a), codeSections(b)
	for i := 0; i < max(len(sa), len(sb)); i++ {
		if i >= len(sa) || i >= len(sb) {
			return fmt.Errorf("sections: %s, the rebuilt cubin has %s", names(sa), names(sb))
		}
		x, y := sa[i], sb[i]
		if x.Name != y.Name || x.Type != y.Type || x.Flags != y.Flags || x.Addr != y.Addr || x.Addralign != y.Addralign || x.Entsize != y.Entsize || x.Link != y.Link || x.Info != y.Info || x.Size != y.Size {
			return fmt.Errorf("section %d: %s (%v, %d bytes), the rebuilt cubin's %s (%v, %d bytes)", i, x.Name, x.Type, x.Size, y.Name, y.Type, y.Size)
		}
		if x.Type == elf.SHT_NOBITS {
			continue
		}
		dx, err := x.Data()
		if err != nil {
			return fmt.Errorf("the stored cubin: section %s: %v", x.Name, err)
		}
		dy, err := y.Data()
		if err != nil {
			return fmt.Errorf("the rebuilt cubin: section %s: %v", y.Name, err)
		}
		for j := range dx {
			if dx[j] != dy[j] {
				return fmt.Errorf("section %s: byte %d is %#02x, the rebuilt cubin's %#02x", x.Name, j, dx[j], dy[j])
			}
		}
	}
	return nil
}

// openCubin parses a cubin as ELF. NVIDIA keeps the CUDA ABI version in
// e_version (128 for ptxas 12 and 13), which debug/elf refuses unless it
// is 1: a copy with 1 there is parsed, and the version returned apart.
func openCubin(raw []byte) (*elf.File, uint32, error) {
	if len(raw) < 24 || !bytes.HasPrefix(raw, []byte(elf.ELFMAG)) {
		return nil, 0, fmt.Errorf("not an ELF file")
	}
	c := bytes.Clone(raw)
	order := binary.ByteOrder(binary.LittleEndian)
	if elf.Data(c[elf.EI_DATA]) == elf.ELFDATA2MSB {
		order = binary.BigEndian
	}
	v := order.Uint32(c[20:])
	order.PutUint32(c[20:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(c))
	return f, v, err
}

func codeSections(f *elf.File) []*elf.Section {
	var out []*elf.Section
	for _, s := range f.Sections {
		if !Debug(s.Name) {
			out = append(out, s)
		}
	}
	return out
}

func names(ss []*elf.Section) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	return "[" + strings.Join(n, " ") + "]"
}

// elfFlags is e_flags, which debug/elf does not keep: in a cubin it
// carries the SM architecture.
func elfFlags(raw []byte, f *elf.File) uint32 {
	off := 36 // ELF32
	if f.Class == elf.ELFCLASS64 {
		off = 48
	}
	if len(raw) < off+4 {
		return 0
	}
	return f.ByteOrder.Uint32(raw[off:])
}

// PtxasHint is where FindPtxas looks, in order.
const PtxasHint = "$TILEPIPE_PTXAS, ptxas on PATH, $CUDA_HOME/bin, /usr/local/cuda/bin"

// FindPtxas is the ptxas that builds cubins from PTX here: $TILEPIPE_PTXAS,
// else ptxas on PATH, else $CUDA_HOME/bin/ptxas, else
// /usr/local/cuda/bin/ptxas, resolved to an absolute path. Capture hands it
// to cubin routes' builds as TILEPIPE_PTXAS (the triton route gives it to
// Triton); prepare runs it on every stored PTX. Route code never names it.
func FindPtxas() (string, error) {
	if p := os.Getenv("TILEPIPE_PTXAS"); p != "" {
		return executable(p)
	}
	if p, err := exec.LookPath("ptxas"); err == nil {
		return executable(p)
	}
	for _, d := range []string{os.Getenv("CUDA_HOME"), "/usr/local/cuda"} {
		if d == "" {
			continue
		}
		if p, err := executable(filepath.Join(d, "bin", "ptxas")); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("ptxas not found (%s)", PtxasHint)
}

func executable(p string) (string, error) {
	a, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(a)
	if err != nil {
		return "", fmt.Errorf("ptxas %s: %v", p, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("ptxas %s: not an executable file", a)
	}
	return a, nil
}
