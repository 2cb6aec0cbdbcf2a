package launch

import (
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/oracle"
)

var gemmSig = oracle.SignatureOf("gemm", map[string]int{"M": 64, "N": 64, "K": 512}, "f32")

// splitK is a split-K GEMM as a pipeline: partial products of four K
// slices into a buffer, then their sum into C.
const splitK = `{"arch": "sm_90", "ptxas": [],
 "buffers": [{"bytes": 65536, "align": 256}],
 "launches": [
  {"kernel": "gemm_partial", "grid": [4, 4, 4], "block": [128, 1, 1], "cluster": [1, 1, 1], "sharedBytes": 0,
   "params": [{"kind": "tensor", "tensor": "A", "align": 16}, {"kind": "tensor", "tensor": "B", "align": 16}, {"kind": "buffer", "buffer": 0}, {"kind": "i32", "value": 512}]},
  {"kernel": "gemm_reduce", "grid": [16, 1, 1], "block": [256, 1, 1], "cluster": [1, 1, 1], "sharedBytes": 0,
   "params": [{"kind": "buffer", "buffer": 0}, {"kind": "tensor", "tensor": "C", "align": 16}, {"kind": "i32", "value": 4}]}]}`

// TestPipeline: a pipeline manifest checks, renders its buffers and then
// each launch in order, and matches a PTX with both entries.
func TestPipeline(t *testing.T) {
	m, err := Parse([]byte(splitK))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(gemmSig); err != nil {
		t.Fatalf("Check(split-K) = %v", err)
	}
	want := "arch sm_90\nbuffer 65536 256\n" +
		"launch\nkernel gemm_partial\ngrid 4 4 4\nblock 128 1 1\ncluster 1 1 1\nshared 0\nparam tensor 0 16\nparam tensor 1 16\nparam buffer 0\nparam i32 512\n" +
		"launch\nkernel gemm_reduce\ngrid 16 1 1\nblock 256 1 1\ncluster 1 1 1\nshared 0\nparam buffer 0\nparam tensor 2 16\nparam i32 4\n"
	if got := m.Lines(gemmSig); got != want {
		t.Errorf("Lines =\n%s\nwant\n%s", got, want)
	}
	ptx := []byte(".version 8.0\n.target sm_90\n.visible .entry gemm_partial(\n.param .u64 a,\n.param .u64 b,\n.param .u64 w,\n.param .u32 k\n)\n{ ret; }\n" +
		".visible .entry gemm_reduce(\n.param .u64 w,\n.param .u64 c,\n.param .u32 s\n)\n{ ret; }\n")
	if err := m.MatchPTX(ptx); err != nil {
		t.Errorf("MatchPTX = %v", err)
	}
	short := []byte(strings.Replace(string(ptx), ",\n.param .u32 s\n", "\n", 1))
	if err, want := m.MatchPTX(short), "launch manifest: launches[1]: 3 params, the PTX entry gemm_reduce has 2 (u64 u64)"; err == nil || err.Error() != want {
		t.Errorf("MatchPTX(reduce without its count) = %v, want %s", err, want)
	}
}

// TestPipelineRefuses: every check a pipeline adds, each fed a manifest
// that breaks it, with the exact reason.
func TestPipelineRefuses(t *testing.T) {
	many := `"launches": [` + strings.Repeat(`{"kernel": "k", "grid": [1, 1, 1], "block": [1, 1, 1], "cluster": [1, 1, 1], "params": [{"kind": "buffer", "buffer": 0}]}, `, MaxLaunches)
	for _, tc := range []struct{ name, from, to, want string }{
		{"top-level kernel too", `{"arch"`, `{"kernel": "k", "arch"`, "launches: then kernel, grid, block, cluster, sharedBytes, params and scratch belong in each launch, not at the top"},
		{"top-level scratch too", `"ptxas": [],`, `"ptxas": [], "scratch": [{"bytes": 0, "align": 1}],`, "launches: then kernel, grid, block, cluster, sharedBytes, params and scratch belong in each launch, not at the top"},
		{"too many launches", `"launches": [`, many, "launches: want 1 to 16, got 18"},
		{"buffer index", `{"kind": "buffer", "buffer": 0}, {"kind": "tensor", "tensor": "C"`, `{"kind": "buffer", "buffer": 1}, {"kind": "tensor", "tensor": "C"`, "launches[1].params[0]: buffer: want an index below 1 (buffers), got 1"},
		{"buffer without index", `{"kind": "buffer", "buffer": 0}, {"kind": "i32", "value": 512}`, `{"kind": "buffer"}, {"kind": "i32", "value": 512}`, "launches[0].params[2]: buffer: want an index below 1 (buffers), got none"},
		{"index on a tensor", `"tensor": "C", "align": 16}`, `"tensor": "C", "align": 16, "buffer": 0}`, "launches[1].params[1]: kind tensor: a buffer index only for kind buffer"},
		{"buffer unused", `"buffers": [{"bytes": 65536, "align": 256}]`, `"buffers": [{"bytes": 65536, "align": 256}, {"bytes": 8, "align": 8}]`, "buffers[1]: passed to no launch"},
		{"buffer size", `{"bytes": 65536, "align": 256}`, `{"bytes": 1073741825, "align": 256}`, "buffers[0].bytes: want 0 to 1073741824, got 1073741825"},
		{"buffers in all", `{"bytes": 65536, "align": 256}]`, `{"bytes": 65536, "align": 256}, {"bytes": 1073741824, "align": 256}]`, "buffers: 1073807360 bytes in all, limit 1073741824"},
		{"buffer align", `"align": 256}`, `"align": 24}`, "buffers[0].align: want a power of two up to 4096, got 24"},
		{"tensor in no launch", `{"kind": "tensor", "tensor": "C", "align": 16}`, `{"kind": "i32", "value": 0}`, `tensor "C" of the signature is passed by no launch`},
		{"tensor twice in a launch", `"tensor": "B", "align": 16}`, `"tensor": "A", "align": 16}`, `launches[0].params[1]: tensor "A" already passed as params[0]`},
		{"scratch in a pipeline", `{"kind": "i32", "value": 4}`, `{"kind": "scratch"}`, "launches[1]: a scratch parameter: a pipeline passes buffers (kind buffer, by index)"},
		{"second kernel", `"kernel": "gemm_reduce"`, `"kernel": "gemm reduce"`, `launches[1].kernel: "gemm reduce" is not a symbol`},
		{"second grid", `"grid": [16, 1, 1]`, `"grid": [16, 65536, 1]`, "launches[1].grid[1]: want 1 to 65535, got 65536"},
		{"unknown kind", `{"kind": "i32", "value": 4}`, `{"kind": "u8", "value": 4}`, `launches[1].params[2]: kind "u8": want tensor, i32, i64, f32, scratch, buffer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := splitK
			if !strings.Contains(in, tc.from) {
				t.Fatalf("the split-K manifest has no %q", tc.from)
			}
			m, err := Parse([]byte(strings.Replace(in, tc.from, tc.to, 1)))
			if err == nil {
				err = m.Check(gemmSig)
			}
			if want := "launch manifest: " + tc.want; err == nil || err.Error() != want {
				t.Errorf("got %v\nwant %s", err, want)
			}
		})
	}
	// One launch takes no buffers: its kind list has none, and the field
	// is refused.
	single := strings.Replace(probeAdd, `{"kind": "scratch"}, {"kind": "scratch"}`, `{"kind": "buffer", "buffer": 0}, {"kind": "scratch"}`, 1)
	m, err := Parse([]byte(single))
	if err == nil {
		err = m.Check(addSig)
	}
	if want := `launch manifest: params[4]: kind "buffer": want tensor, i32, i64, f32, scratch`; err == nil || err.Error() != want {
		t.Errorf("one launch with a buffer param: got %v, want %s", err, want)
	}
	m, _ = Parse([]byte(strings.Replace(probeAdd, `"ptxas"`, `"buffers": [{"bytes": 8, "align": 8}], "ptxas"`, 1)))
	if err, want := m.Check(addSig), "launch manifest: buffers: a pipeline's (launches), not one launch's: use scratch"; err == nil || err.Error() != want {
		t.Errorf("one launch with buffers: got %v, want %s", err, want)
	}
}
