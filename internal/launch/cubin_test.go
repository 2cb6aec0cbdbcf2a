package launch

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// The cubins are Triton 3.6's on the H200 (testdata/gpu-checkpoint's add
// 2x64 and softmax 3x33); the rebuilt one is ptxas 12.8 (the ptxas Triton
// bundles) run again on the add's PTX with the manifest's flags, on the
// same machine (docs/results/2026-12-04-ptxas-chain): its bytes differ
// from the stored cubin's only where ptxas wrote its input file's name.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// section returns the offset and size of the named section in a cubin.
func section(t *testing.T, cubin []byte, name string) (int, int) {
	t.Helper()
	f, _, err := openCubin(cubin)
	if err != nil {
		t.Fatal(err)
	}
	s := f.Section(name)
	if s == nil {
		t.Fatalf("no section %s", name)
	}
	return int(s.Offset), int(s.Size)
}

// TestSameCode: a cubin holds the same code as itself and as ptxas's
// rebuild of its PTX; one byte of its kernel's code or launch metadata
// changed, or another kernel, is refused naming the section; a byte of
// debug information changed is not code.
func TestSameCode(t *testing.T) {
	add := readFixture(t, "triton-add-2x64-sm90a.cubin")
	rebuilt := readFixture(t, "triton-add-2x64-sm90a.rebuilt.cubin")
	if bytes.Equal(add, rebuilt) {
		t.Fatal("the rebuilt fixture is byte for byte the stored cubin: it shows nothing")
	}
	if err := SameCode(add, add); err != nil {
		t.Errorf("SameCode(a cubin, itself) = %v", err)
	}
	if err := SameCode(add, rebuilt); err != nil {
		t.Errorf("SameCode(the stored cubin, ptxas's rebuild of its PTX) = %v", err)
	}
	edit := func(name string, at int) []byte {
		b := bytes.Clone(add)
		off, size := section(t, b, name)
		if at >= size {
			t.Fatalf("section %s has %d bytes", name, size)
		}
		b[off+at] ^= 0x40
		return b
	}
	for _, tc := range []struct {
		name string
		cub  []byte
		want string
	}{
		{"an instruction changed", edit(".text.add_kernel", 0x40), "section .text.add_kernel: byte 64 is "},
		{"its launch metadata changed", edit(".nv.info.add_kernel", 8), "section .nv.info.add_kernel: byte 8 is "},
		{"its constants changed", edit(".nv.constant0.add_kernel", 0), "section .nv.constant0.add_kernel: byte 0 is "},
		{"another kernel", readFixture(t, "triton-softmax-3x33-sm90a.cubin"), "program header 3: "},
		{"not an ELF file", []byte("stand-in cubin"), "the stored cubin: "},
	} {
		err := SameCode(tc.cub, rebuilt)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: SameCode = %v, want %q...", tc.name, err, tc.want)
		}
	}
	// The architecture: e_flags carries the SM version.
	arch := bytes.Clone(add)
	arch[48] ^= 0x01
	if err := SameCode(arch, rebuilt); err == nil || !strings.HasPrefix(err.Error(), "ELF flags ") {
		t.Errorf("SameCode(another architecture) = %v, want the ELF flags named", err)
	}
	// Debug information is not code: ptxas writes its input's name there.
	for _, name := range []string{".nv_debug_line_sass", ".debug_line", ".nv_debug_ptx_txt"} {
		if err := SameCode(edit(name, 0), rebuilt); err != nil {
			t.Errorf("SameCode(a byte of %s changed) = %v, want nil: the driver loads no debug section", name, err)
		}
	}
}

func TestDebug(t *testing.T) {
	for name, want := range map[string]bool{
		".debug_line": true, ".debug_frame": true, ".nv_debug_line_sass": true, ".nv_debug_ptx_txt": true,
		".rela.debug_line": true, ".rel.debug_frame": true, ".rela.nv_debug_line_sass": true,
		".text.add_kernel": false, ".nv.info": false, ".nv.info.add_kernel": false, ".nv.constant0.add_kernel": false,
		".symtab": false, ".strtab": false, ".nv.callgraph": false, ".rela.text.add_kernel": false,
	} {
		if Debug(name) != want {
			t.Errorf("Debug(%s) = %v, want %v", name, !want, want)
		}
	}
}

func TestTarget(t *testing.T) {
	if got, err := Target(readFixture(t, "triton-add-2x64-sm90a.ptx")); err != nil || got != "sm_90a" {
		t.Errorf("Target(Triton's PTX for the H200) = %q, %v; want sm_90a", got, err)
	}
	for _, tc := range []struct{ ptx, want string }{
		{".version 8.7\n.address_size 64\n", "ptx: no .target sm_NN directive"},
		{".target sm_90a\n.target sm_80\n", "ptx: 2 .target directives, want one"},
	} {
		if _, err := Target([]byte(tc.ptx)); err == nil || err.Error() != tc.want {
			t.Errorf("Target(%q) = %v, want %s", tc.ptx, err, tc.want)
		}
	}
}
