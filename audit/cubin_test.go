package audit

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/launch"
	"github.com/tilepipe/tilepipe/oracle"
)

// chainFixture is a capture build and prepared entry of Triton's add
// 2x64 on the H200 (internal/launch/testdata): the stored PTX, cubin and
// a launch manifest with its ptxas flags, and the cubin ptxas 12.8 built
// again from the PTX, whose bytes differ from the stored one's only in
// debug information.
type chainFixture struct {
	cdoc  artifacts.CaptureDoc
	pdoc  artifacts.PreparedDoc
	blobs map[artifacts.Digest][]byte
}

func newChainFixture(t *testing.T) *chainFixture {
	t.Helper()
	f := &chainFixture{blobs: map[artifacts.Digest][]byte{}}
	ref := func(path, role string, b []byte) artifacts.FileRef {
		d := digest.FromBytes(b)
		f.blobs[d] = b
		return artifacts.FileRef{Path: path, Role: role, Digest: d, Size: int64(len(b))}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile("../internal/launch/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ptx := ref("kernel.ptx", "ptx", read("triton-add-2x64-sm90a.ptx"))
	cub := ref("kernel.cubin", "cubin", read("triton-add-2x64-sm90a.cubin"))
	mb := []byte(`{"kernel": "add_kernel", "arch": "sm_90", "grid": [1, 1, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "sharedBytes": 0,
 "params": [{"kind": "tensor", "tensor": "A", "align": 16}, {"kind": "tensor", "tensor": "B", "align": 16}, {"kind": "tensor", "tensor": "C", "align": 16},
  {"kind": "i32", "value": 128}, {"kind": "scratch"}, {"kind": "scratch"}],
 "scratch": [{"bytes": 0, "align": 1}, {"bytes": 0, "align": 1}], "ptxas": ["-lineinfo", "-v"]}`)
	man := ref("launch.json", "manifest", mb)
	sig := oracle.SignatureOf("add", map[string]int{"M": 2, "N": 64}, "f32")
	m, err := launch.Parse(mb)
	if err != nil {
		t.Fatal(err)
	}
	lines := ref("launch.txt", "launch", []byte(m.Lines(sig)))
	rebuilt := ref("rebuilt.cubin", "cubin", read("triton-add-2x64-sm90a.rebuilt.cubin"))
	ref("softmax.cubin", "cubin", read("triton-softmax-3x33-sm90a.cubin"))
	f.cdoc.Cases = []artifacts.CapturedCase{{Builds: []artifacts.Build{{Route: "triton", Files: []artifacts.FileRef{ptx, cub, man}}}}}
	f.cdoc.Cases[0].Case.ID = "add-2x64-cuda"
	f.cdoc.Cases[0].Signature = sig
	f.pdoc.Entries = []artifacts.Prepared{{Case: "add-2x64-cuda", Route: "triton", Kind: "cubin", Status: artifacts.StatusPrepared,
		Kernel: []artifacts.FileRef{cub, lines},
		Chain: &artifacts.CubinChain{PTX: ptx.Digest, Cubin: cub.Digest, Rebuilt: rebuilt, Ptxas: "/opt/ptxas", PtxasDigest: digest.FromBytes([]byte("ptxas")),
			PtxasVersion: "Cuda compilation tools, release 12.8, V12.8.93", Args: []string{"-lineinfo", "-v", "--gpu-name=sm_90a"}}}}
	return f
}

func (f *chainFixture) read(d artifacts.Digest, _ int64) ([]byte, error) {
	if b, ok := f.blobs[d]; ok {
		return b, nil
	}
	return nil, fmt.Errorf("blob %s is not a layer", artifacts.Short(d))
}

// fixtureDigest is a fixture's digest.
func fixtureDigest(t *testing.T, name string) artifacts.Digest {
	t.Helper()
	b, err := os.ReadFile("../internal/launch/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return digest.FromBytes(b)
}

// noRebuild fails the test if the audit tries to run ptxas: TILEPIPE_PTXAS
// names no file, so none is found here.
func noRebuild(t *testing.T) rebuild {
	return func(string, []string, []byte) ([]byte, error) {
		t.Error("rebuilt without a ptxas here")
		return nil, errors.New("no ptxas")
	}
}

// TestCubinChains: an honest chain passes (with the warning that no ptxas
// here rebuilt it); each forgery of a prepared entry's chain, or of the
// cubin a capture build stored, is refused with the reason; an entry
// prepared before the chain is a warning.
func TestCubinChains(t *testing.T) {
	t.Setenv("TILEPIPE_PTXAS", "/nonexistent/ptxas")
	notHere := "the PTX was not built again here with the ptxas prepare used, /opt/ptxas ("
	f := newChainFixture(t)
	p, w, n := cubinChains(f.cdoc, f.pdoc, f.read, f.read, noRebuild(t))
	if len(p) != 0 || n != 1 || len(w) != 1 || !strings.HasPrefix(w[0], notHere) || !strings.HasSuffix(w[0], "ptxas /nonexistent/ptxas: stat /nonexistent/ptxas: no such file or directory; the rebuilt cubins are prepare's") {
		t.Fatalf("honest chain: problems %q, warnings %q, %d entries", p, w, n)
	}
	softmax := fixtureDigest(t, "triton-softmax-3x33-sm90a.cubin")
	for _, tc := range []struct {
		name string
		edit func(f *chainFixture)
		want string
	}{
		{"rebuilt is another kernel", func(f *chainFixture) { f.pdoc.Entries[0].Chain.Rebuilt.Digest = softmax },
			"entry add-2x64-cuda/triton: chain: kernel.cubin is not the rebuilt cubin's code: program header 3: "},
		// The attack the chain is for: a cheating cubin beside honest PTX,
		// the records rewritten to match it.
		{"a cubin that is not its PTX's", func(f *chainFixture) {
			f.cdoc.Cases[0].Builds[0].Files[1].Digest = softmax
			f.pdoc.Entries[0].Kernel[0].Digest = softmax
			f.pdoc.Entries[0].Chain.Cubin = softmax
		}, "entry add-2x64-cuda/triton: chain: kernel.cubin is not the rebuilt cubin's code: program header 3: "},
		{"the timer loads another cubin", func(f *chainFixture) { f.pdoc.Entries[0].Kernel[0].Digest = softmax },
			"entry add-2x64-cuda/triton: chain: cubin "},
		{"another PTX", func(f *chainFixture) { f.pdoc.Entries[0].Chain.PTX = softmax },
			"entry add-2x64-cuda/triton: chain: ptx "},
		{"flags not the manifest's", func(f *chainFixture) { f.pdoc.Entries[0].Chain.Args = []string{"--gpu-name=sm_90a"} },
			`entry add-2x64-cuda/triton: chain: ptxas ran with ["--gpu-name=sm_90a"], the manifest and the PTX's .target give ["-lineinfo" "-v" "--gpu-name=sm_90a"]`},
		{"no ptxas digest", func(f *chainFixture) { f.pdoc.Entries[0].Chain.PtxasDigest = "" },
			`entry add-2x64-cuda/triton: chain: ptxas "/opt/ptxas", digest "": want an absolute path and its digest`},
		{"rebuilt not a layer", func(f *chainFixture) { f.pdoc.Entries[0].Chain.Rebuilt.Digest = digest.FromBytes([]byte("gone")) },
			"entry add-2x64-cuda/triton: chain: rebuilt cubin: blob "},
		// The launch list: a prepared launch file that launches less (one
		// block of a grid the manifest gives more), or a manifest that does
		// not fit the case or its PTX.
		{"launch file not the manifest's", func(f *chainFixture) {
			b := []byte(strings.Replace(string(f.blobs[f.pdoc.Entries[0].Kernel[1].Digest]), "block 128 1 1", "block 32 1 1", 1))
			d := digest.FromBytes(b)
			f.blobs[d] = b
			f.pdoc.Entries[0].Kernel[1].Digest = d
		}, "entry add-2x64-cuda/triton: chain: launch file launch.txt ("},
		{"manifest not the case's", func(f *chainFixture) { f.cdoc.Cases[0].Signature = f.cdoc.Cases[0].Signature[:2] },
			`entry add-2x64-cuda/triton: chain: launch manifest: params[2]: tensor "C" is not in the case's signature`},
		{"manifest not the PTX's", func(f *chainFixture) {
			b := []byte(strings.Replace(string(f.blobs[f.cdoc.Cases[0].Builds[0].Files[2].Digest]), "add_kernel", "mul_kernel", 1))
			d := digest.FromBytes(b)
			f.blobs[d] = b
			f.cdoc.Cases[0].Builds[0].Files[2].Digest = d
		}, "entry add-2x64-cuda/triton: chain: launch manifest: ptx: no .entry mul_kernel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newChainFixture(t)
			tc.edit(f)
			p, _, _ := cubinChains(f.cdoc, f.pdoc, f.read, f.read, noRebuild(t))
			if len(p) != 1 || !strings.HasPrefix(p[0], tc.want) {
				t.Errorf("problems %q, want one: %q...", p, tc.want)
			}
		})
	}
	f = newChainFixture(t)
	f.pdoc.Entries[0].Chain = nil
	if p, w, _ := cubinChains(f.cdoc, f.pdoc, f.read, f.read, noRebuild(t)); len(p) != 0 || !slices.Equal(w, []string{"entry add-2x64-cuda/triton: prepared before the cubin chain: its cubin is not tied to its PTX"}) {
		t.Errorf("no chain: problems %q, warnings %q", p, w)
	}
}

// TestCubinChainsHere: where the ptxas prepare recorded is found here (by
// digest), the audit builds the PTX again with it and compares the code
// with the stored cubin; its rebuild is ptxas's output on the H200 (the
// fixture), or another kernel's.
func TestCubinChainsHere(t *testing.T) {
	exe, err := os.Executable() // a file found here, standing for ptxas by its digest
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TILEPIPE_PTXAS", exe)
	d, _, err := artifacts.HashFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, build, want string }{
		{"the same code", "triton-add-2x64-sm90a.rebuilt.cubin", ""},
		{"other code", "triton-softmax-3x33-sm90a.cubin", "entry add-2x64-cuda/triton: chain: kernel.cubin is not what ptxas builds here from kernel.ptx: program header 3: "},
	} {
		f := newChainFixture(t)
		f.pdoc.Entries[0].Chain.PtxasDigest = d
		var ran []string
		p, w, _ := cubinChains(f.cdoc, f.pdoc, f.read, f.read, func(path string, args []string, ptx []byte) ([]byte, error) {
			ran = append([]string{path}, args...)
			if target, err := launch.Target(ptx); err != nil || target != "sm_90a" {
				t.Errorf("ptxas given %q, %v: want the stored PTX", target, err)
			}
			return os.ReadFile("../internal/launch/testdata/" + tc.build)
		})
		if !slices.Equal(ran, []string{exe, "-lineinfo", "-v", "--gpu-name=sm_90a"}) {
			t.Errorf("%s: ran %q, want the ptxas found here with the recorded flags", tc.name, ran)
		}
		if len(w) != 0 || (tc.want == "" && len(p) != 0) || (tc.want != "" && (len(p) != 1 || !strings.HasPrefix(p[0], tc.want))) {
			t.Errorf("%s: problems %q, warnings %q; want %q", tc.name, p, w, tc.want)
		}
	}
}
