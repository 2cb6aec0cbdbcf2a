package main

import (
	"context"
	"slices"

	"github.com/tilepipe/tilepipe/capture"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCubinPrepared: a cubin build that capture checked goes through
// prepare as an explicit unsupported row (exit 3) until the CUDA timer
// exists, never as something timed on the CPU.
func TestCubinPrepared(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	ptx, err := os.ReadFile("../../internal/launch/testdata/triton-add-sm90.ptx")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "add.ptx"), ptx, 0o644)
	os.WriteFile(filepath.Join(src, "add.cubin"), []byte("stand-in cubin"), 0o644)
	os.WriteFile(filepath.Join(src, "launch.json"), []byte(`{"kernel": "add_kernel", "arch": "sm_90", "grid": [977, 1, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "sharedBytes": 0,
 "params": [{"kind": "tensor", "tensor": "A", "align": 16}, {"kind": "tensor", "tensor": "B", "align": 16}, {"kind": "tensor", "tensor": "C", "align": 16},
  {"kind": "i32", "value": 1000000}, {"kind": "scratch"}, {"kind": "scratch"}], "scratch": [{"bytes": 0, "align": 1}, {"bytes": 0, "align": 1}]}`), 0o644)
	route := filepath.Join(dir, "route")
	os.WriteFile(route, []byte(strings.ReplaceAll(`#!/bin/sh
if [ "$1" = describe ]; then
  echo '{"protocol": 1, "name": "cubes", "kind": "cubin", "version": "1", "available": true, "reason": "", "ops": ["add"], "devices": ["cuda"]}'
  exit 0
fi
prev=""; for a; do [ "$prev" = "--workdir" ] && w="$a"; prev="$a"; done
cp SRC/* "$w"/
echo '{"protocol": 1, "status": "built", "kind": "cubin", "files": [{"path": "add.cubin", "role": "cubin"}, {"path": "add.ptx", "role": "ptx"}, {"path": "launch.json", "role": "manifest"}]}'
`, "SRC", src)), 0o755)
	co := filepath.Join(dir, "cohort.json")
	os.WriteFile(co, []byte(`{"schema": 1, "cases": [{"op": "add", "dims": {"M": 1000, "N": 1000}, "seed": 7, "device": "cuda"}]}`), 0o644)
	capDir, prepDir := filepath.Join(dir, "capture"), filepath.Join(dir, "prepared")
	if code, out, errs := tp(t, "capture", "--cohort", co, "--routes", "", "--route-exec", route, "--no-sandbox", "--output", capDir); code != 0 {
		t.Fatalf("capture = exit %d\n%s%s", code, out, errs)
	}
	code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir, "--no-sandbox")
	if code != exitUnsupported {
		t.Fatalf("prepare = exit %d, want 3\n%s", code, errs)
	}
	e := readPrepared(t, prepDir).Entries[0]
	if want := "kind cubin: no CUDA timer yet (docs/gpu.md)"; e.Status != "unsupported" || e.Reason != want {
		t.Errorf("prepared entry = %s %q, want unsupported %q", e.Status, e.Reason, want)
	}
}

// TestTritonDescribe: the triton route answers describe on any machine
// (here without Triton: unavailable, with the import's error), as a cubin
// route for cuda alone, which capture accepts.
func TestTritonDescribe(t *testing.T) {
	p, err := filepath.Abs("../../routes/triton/route")
	if err != nil {
		t.Fatal(err)
	}
	d, err := capture.Describe(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != "cubin" || !slices.Equal(d.Devices, []string{"cuda"}) || (!d.Available && !strings.HasPrefix(d.Reason, "import triton: ")) {
		t.Errorf("describe = %+v, want kind cubin for [cuda], available or the import's error", d)
	}
}
