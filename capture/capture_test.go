package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/cohort"
	"github.com/tilepipe/tilepipe/oracle"
)

// fakeRoute is a route program that answers describe and build with the
// JSON a test wrote next to it, copies the files under files/ into the
// workdir, and keeps the case file (case.json), its workdir's path
// (workdir.txt) and every input it was given (input-NAME.bin) for the test
// to inspect.
const fakeRoute = `#!/usr/bin/env python3
import json, os, shutil, sys
HERE = os.path.dirname(os.path.abspath(__file__))
if sys.argv[1:] == ["describe"]:
    sys.stdout.write(open(os.path.join(HERE, "describe.json")).read())
    sys.exit(0)
case_path, work = sys.argv[3], sys.argv[5]
shutil.copy(case_path, os.path.join(HERE, "case.json"))
open(os.path.join(HERE, "workdir.txt"), "w").write(work)
for i in json.load(open(case_path)).get("inputs", []):
    shutil.copy(i["path"], os.path.join(HERE, "input-" + i["name"] + ".bin"))
files = os.path.join(HERE, "files")
if os.path.isdir(files):
    for n in os.listdir(files):
        shutil.copy(os.path.join(files, n), os.path.join(work, n))
sys.stdout.write(open(os.path.join(HERE, "response.json")).read())
`

// newFakeRoute writes a fake route named name whose describe adds extra
// (e.g. "validates": true) and whose build answers resp with files.
func newFakeRoute(t *testing.T, name, extra string, resp map[string]any, files map[string][]byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	must(t, os.MkdirAll(filepath.Join(dir, "files"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "route"), []byte(fakeRoute), 0o755))
	desc := fmt.Sprintf(`{"protocol": 1, "name": %q, "kind": "object", "version": "fake 1", "available": true, "reason": "", "ops": ["add"]%s}`, name, extra)
	must(t, os.WriteFile(filepath.Join(dir, "describe.json"), []byte(desc), 0o644))
	b, err := json.Marshal(resp)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "response.json"), b, 0o644))
	for n, data := range files {
		must(t, os.WriteFile(filepath.Join(dir, "files", n), data, 0o644))
	}
	return filepath.Join(dir, "route")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// addCase writes a one-case cohort (add, M=2, N=3) and returns its path
// and the case as capture normalizes it.
func addCase(t *testing.T) (string, oracle.Case) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cohort.json")
	must(t, os.WriteFile(p, []byte(`{"schema": 1, "name": "t", "cases": [{"id": "add-2x3", "op": "add", "dims": {"M": 2, "N": 3}, "seed": 7}]}`), 0o644))
	co, _, err := cohort.Load(p)
	must(t, err)
	return p, co.Cases[0]
}

// addOutput is a correct C = A + B for c, as raw little-endian f32.
func addOutput(t *testing.T, c oracle.Case) []byte {
	t.Helper()
	in, err := oracle.Generate(c)
	must(t, err)
	out := make([]float32, len(in[0].F))
	for i := range out {
		out[i] = in[0].F[i] + in[1].F[i]
	}
	return oracle.Encode(oracle.F32(out))
}

// builtResponse is a built answer with an object, a source and extra files.
func builtResponse(c oracle.Case, extra ...map[string]any) map[string]any {
	files := []map[string]any{{"path": "k.o", "role": "object"}, {"path": "k.c", "role": "source"}}
	return map[string]any{"protocol": 1, "status": "built", "reason": "", "kind": "object",
		"files": append(files, extra...), "entry": map[string]any{"symbol": "tilepipe_entry", "params": oracle.SignatureOf(c.Op, c.Dims, c.Dtype)}}
}

// runCapture captures into a new directory, cfg.Output when it returns.
func runCapture(t *testing.T, cfg Config) (*Result, error) {
	t.Helper()
	if cfg.Output == "" {
		cfg.Output = filepath.Join(t.TempDir(), "capture")
	}
	cfg.Routes, cfg.Threads, cfg.Jobs, cfg.BuildTimeout = nil, 1, 1, DefaultConfig.BuildTimeout
	// The fake route reports what it saw by writing next to itself, which
	// the build sandbox forbids; TestBuildSandbox tests the sandbox.
	cfg.NoSandbox = true
	return Run(context.Background(), cfg)
}

// spyRoute answers every build unsupported, with a reason that says what
// it could see and do: the capture's store (named by TILEPIPE_TEST_STORE),
// the scratch directory around its workdir, a file it plants in /tmp (the
// host's, read-only in the sandbox), and the environment it got.
const spyRoute = `#!/bin/sh
if [ "$1" = describe ]; then
  echo '{"protocol": 1, "name": "spy", "kind": "object", "version": "spy 1", "available": true, "reason": "", "ops": ["add"]}'
  exit 0
fi
work=$5
store=$(ls "$TILEPIPE_TEST_STORE" 2>/dev/null | tr '
' ' ')
scratch=$(ls "$(dirname "$work")" | tr '
' ' ')
echo planted > /tmp/tilepipe-spy-planted 2>/dev/null && tmp=written || tmp=refused
echo x > "$(dirname "$work")/planted" 2>/dev/null && up=written || up=refused
echo x > "$work/kept" && own=written || own=refused
printf '{"protocol": 1, "status": "unsupported", "reason": "store=[%s] scratch=[%s] tmp=%s up=%s own=%s secret=%s"}
' "$store" "$scratch" "$tmp" "$up" "$own" "$TILEPIPE_TEST_SECRET"
`

// TestBuildSandbox: a route build sees neither the capture's store (the
// expected outputs) nor the other builds' scratch, writes only its own
// workdir and a private tmpfs, never the host's /tmp, and gets only the
// --route-env variables.
func TestBuildSandbox(t *testing.T) {
	cohortPath, _ := addCase(t)
	dir := t.TempDir()
	route := filepath.Join(dir, "route")
	must(t, os.WriteFile(route, []byte(spyRoute), 0o755))
	out := filepath.Join(t.TempDir(), "capture")
	t.Setenv("TILEPIPE_TEST_SECRET", "leaked")
	os.Remove("/tmp/tilepipe-spy-planted")
	for _, sandbox := range []bool{true, false} {
		o := out
		if !sandbox {
			o += "-unsandboxed"
		}
		cfg := Config{Cohort: cohortPath, RouteExec: []string{route}, Output: o, RouteEnv: []string{"TILEPIPE_TEST_STORE=" + o}}
		cfg.Routes, cfg.Threads, cfg.Jobs, cfg.BuildTimeout, cfg.NoSandbox = nil, 1, 1, DefaultConfig.BuildTimeout, !sandbox
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("capture (sandbox %t): %v", sandbox, err)
		}
		got := res.Doc.Cases[0].Builds[0].Reason
		// up: the scratch directory is a private tmpfs, gone after the build.
		want := "store=[] scratch=[add-2x3.json add-2x3.spy ] tmp=refused up=written own=written secret="
		if !sandbox {
			// What the sandbox takes away: the store (blobs, index.json, ...),
			// the scratch directory and the host's /tmp are all reachable.
			want = "store=[blobs "
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("spy build (sandbox %t) saw %q, want %q", sandbox, got, want)
		}
		if _, err := os.Stat("/tmp/tilepipe-spy-planted"); (err == nil) == sandbox {
			t.Errorf("spy build (sandbox %t): planted file in the host's /tmp: %v", sandbox, err)
		}
		os.Remove("/tmp/tilepipe-spy-planted")
	}
}

// TestValidation feeds a validating route's outputs to capture: correct
// ones pass, and each kind of bad output fails the build with its reason.
func TestValidation(t *testing.T) {
	cohortPath, c := addCase(t)
	good := addOutput(t, c)
	wrong, err := oracle.Decode("f32", good)
	must(t, err)
	wrong.F[0]++ // far outside its bound
	bad := oracle.Encode(wrong)
	out := func(path, param string) map[string]any {
		return map[string]any{"path": path, "role": "output", "param": param}
	}
	stdFiles := map[string][]byte{"k.o": []byte("obj"), "k.c": []byte("src"), "C.bin": good}
	in, err := oracle.Generate(c)
	must(t, err)
	exp, err := oracle.Reference(c, in)
	must(t, err)
	badVerdict := oracle.Compare(c, exp, []oracle.Tensor{wrong})
	if badVerdict.Pass || !strings.HasPrefix(badVerdict.Reason, "bound: C[0] = ") {
		t.Fatalf("the wrong output passes the oracle: %+v", badVerdict)
	}
	for _, tc := range []struct {
		name      string
		validates bool
		resp      map[string]any
		files     map[string][]byte
		status    string
		reason    string
	}{
		{"correct outputs", true, builtResponse(c, out("C.bin", "C")), stdFiles, artifacts.StatusBuilt, ""},
		{"wrong outputs", true, builtResponse(c, out("C.bin", "C")), map[string][]byte{"k.o": nil, "k.c": nil, "C.bin": bad}, artifacts.StatusFailed,
			"validation: " + badVerdict.Reason},
		{"missing output", true, builtResponse(c), stdFiles, artifacts.StatusFailed,
			"route fake build: response files: no file with role output for param C (want 24 bytes, raw little-endian f32 [2 3])"},
		{"short output", true, builtResponse(c, out("C.bin", "C")), map[string][]byte{"k.o": nil, "k.c": nil, "C.bin": good[:20]}, artifacts.StatusFailed,
			`route fake build: response files[2].path "C.bin": output C has 20 bytes, want 24 (raw little-endian f32 [2 3])`},
		{"output twice", true, builtResponse(c, out("C.bin", "C"), out("C2.bin", "C")), map[string][]byte{"k.o": nil, "k.c": nil, "C.bin": good, "C2.bin": good}, artifacts.StatusFailed,
			`route fake build: response files[3].param "C": a second output file for param C`},
		{"output of an input", true, builtResponse(c, out("C.bin", "A")), stdFiles, artifacts.StatusFailed,
			`route fake build: response files[2].param "A": want the output param the file holds, one of [C]`},
		{"output without param", true, builtResponse(c, map[string]any{"path": "C.bin", "role": "output"}), stdFiles, artifacts.StatusFailed,
			`route fake build: response files[2].param "": want the output param the file holds, one of [C]`},
		{"param on a source", true, builtResponse(c, out("C.bin", "C"), map[string]any{"path": "k.h", "role": "header", "param": "C"}), map[string][]byte{"k.o": nil, "k.c": nil, "k.h": nil, "C.bin": good}, artifacts.StatusFailed,
			`route fake build: response files[3].param "C": only a file with role output names a param`},
		{"output from a route that does not validate", false, builtResponse(c, out("C.bin", "C")), stdFiles, artifacts.StatusFailed,
			`route fake build: response files[2].role output: only a route that describes itself with "validates": true returns outputs`},
		{"no validation without validates", false, builtResponse(c), stdFiles, artifacts.StatusBuilt, ""},
		{"cache file in an object build", false, builtResponse(c, map[string]any{"path": "kc.bin", "role": "cache"}), map[string][]byte{"k.o": nil, "k.c": nil, "kc.bin": nil}, artifacts.StatusFailed,
			`route fake build: response files[2].role cache: only a process build has cache files (its visits get a fresh copy of them)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := ""
			if tc.validates {
				extra = `, "validates": true`
			}
			route := newFakeRoute(t, "fake", extra, tc.resp, tc.files)
			res, err := runCapture(t, Config{Cohort: cohortPath, RouteExec: []string{route}})
			if err != nil {
				t.Fatalf("capture: %v", err)
			}
			b := res.Doc.Cases[0].Builds[0]
			if b.Status != tc.status || b.Reason != tc.reason {
				t.Errorf("build = %s %q, want %s %q", b.Status, b.Reason, tc.status, tc.reason)
			}
			if got := res.Doc.Routes[0].Validates; got != tc.validates {
				t.Errorf("route validates = %t, want %t", got, tc.validates)
			}
			seen := readJSON(t, filepath.Join(filepath.Dir(route), "case.json"))
			if _, ok := seen["inputs"]; ok != tc.validates {
				t.Errorf("case file has inputs: %t, want %t", ok, tc.validates)
			}
			switch {
			case tc.name == "correct outputs":
				want := artifacts.Validation{Pass: true, MaxRatio: b.Validation.MaxRatio, Checked: 6}
				if b.Validation == nil || *b.Validation != want {
					t.Errorf("validation = %+v, want %+v", b.Validation, want)
				}
				i := slices.IndexFunc(b.Files, func(f artifacts.FileRef) bool { return f.Role == "output" })
				if i < 0 || b.Files[i].Param != "C" || b.Files[i].Size != 24 {
					t.Errorf("files = %+v, want the output C (24 bytes) stored", b.Files)
				}
				checkInputs(t, seen, filepath.Dir(route), c)
			case tc.name == "wrong outputs":
				want := artifacts.Validation{Pass: false, Reason: badVerdict.Reason, MaxRatio: badVerdict.MaxRatio, Checked: 6}
				if b.Validation == nil || *b.Validation != want {
					t.Errorf("validation = %+v, want %+v", b.Validation, want)
				}
				if len(b.Files) != 3 {
					t.Errorf("files of the failed validation = %+v, want all three kept for the audit", b.Files)
				}
			case b.Validation != nil:
				t.Errorf("validation = %+v, want none", b.Validation)
			}
		})
	}
}

// checkInputs: the case file names every input in signature order, by an
// absolute path outside the workdir, holding exactly the generated bytes.
func checkInputs(t *testing.T, seen map[string]any, routeDir string, c oracle.Case) {
	t.Helper()
	gen, err := oracle.Generate(c)
	must(t, err)
	work, err := os.ReadFile(filepath.Join(routeDir, "workdir.txt"))
	must(t, err)
	list, _ := seen["inputs"].([]any)
	if len(list) != 2 {
		t.Fatalf("case file inputs = %v, want A and B", seen["inputs"])
	}
	for i, name := range []string{"A", "B"} {
		m := list[i].(map[string]any)
		p, _ := m["path"].(string)
		if m["name"] != name || !filepath.IsAbs(p) || strings.HasPrefix(p, string(work)+"/") {
			t.Errorf("case file inputs[%d] = %v, want %s at an absolute path outside the workdir", i, m, name)
		}
		b, err := os.ReadFile(filepath.Join(routeDir, "input-"+name+".bin"))
		must(t, err)
		if !bytes.Equal(b, oracle.Encode(gen[i])) {
			t.Errorf("input %s: the route read other bytes than the generated input", name)
		}
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(b, &m))
	return m
}

// TestRequiresCPU: a build's requires_cpu is kept; a flag not spelled as
// /proc/cpuinfo spells flags fails the build.
func TestRequiresCPU(t *testing.T) {
	cohortPath, c := addCase(t)
	files := map[string][]byte{"k.o": nil, "k.c": nil}
	for _, tc := range []struct {
		flags  []string
		status string
		reason string
	}{
		{[]string{"avx2", "fma", "avx512_bf16"}, artifacts.StatusBuilt, ""},
		{[]string{"avx2", "AVX512F"}, artifacts.StatusFailed, `route fake build: response requires_cpu[1] "AVX512F": want a CPU flag as /proc/cpuinfo spells it (lowercase letters, digits and '_')`},
		{[]string{""}, artifacts.StatusFailed, `route fake build: response requires_cpu[0] "": want a CPU flag as /proc/cpuinfo spells it (lowercase letters, digits and '_')`},
		{[]string{"sse4.2"}, artifacts.StatusFailed, `route fake build: response requires_cpu[0] "sse4.2": want a CPU flag as /proc/cpuinfo spells it (lowercase letters, digits and '_')`},
	} {
		t.Run(strings.Join(tc.flags, ","), func(t *testing.T) {
			resp := builtResponse(c)
			resp["requires_cpu"] = tc.flags
			res, err := runCapture(t, Config{Cohort: cohortPath, RouteExec: []string{newFakeRoute(t, "fake", "", resp, files)}})
			if err != nil {
				t.Fatalf("capture: %v", err)
			}
			b := res.Doc.Cases[0].Builds[0]
			if b.Status != tc.status || b.Reason != tc.reason {
				t.Errorf("build = %s %q, want %s %q", b.Status, b.Reason, tc.status, tc.reason)
			}
			want := tc.flags
			if tc.status != artifacts.StatusBuilt {
				want = nil
			}
			if !slices.Equal(b.RequiresCPU, want) {
				t.Errorf("build requiresCPU = %v, want %v", b.RequiresCPU, want)
			}
		})
	}
}

// TestEntrySymbol: an object build's entry symbol must be a C identifier,
// since prepare hands it to the linker.
func TestEntrySymbol(t *testing.T) {
	cohortPath, c := addCase(t)
	files := map[string][]byte{"k.o": nil, "k.c": nil}
	for _, tc := range []struct {
		symbol, status, reason string
	}{
		{"tp_add2", artifacts.StatusBuilt, ""},
		{"tp_add,--foo", artifacts.StatusFailed, `route fake build: response entry.symbol "tp_add,--foo": want a C identifier (prepare links the harness's tilepipe_entry to it)`},
		{"2add", artifacts.StatusFailed, `route fake build: response entry.symbol "2add": want a C identifier (prepare links the harness's tilepipe_entry to it)`},
	} {
		t.Run(tc.symbol, func(t *testing.T) {
			resp := builtResponse(c)
			resp["entry"].(map[string]any)["symbol"] = tc.symbol
			res, err := runCapture(t, Config{Cohort: cohortPath, RouteExec: []string{newFakeRoute(t, "fake", "", resp, files)}})
			if err != nil {
				t.Fatalf("capture: %v", err)
			}
			if b := res.Doc.Cases[0].Builds[0]; b.Status != tc.status || b.Reason != tc.reason {
				t.Errorf("build = %s %q, want %s %q", b.Status, b.Reason, tc.status, tc.reason)
			}
		})
	}
}

// TestExternalIR: --ir and --abi are checked, stored and handed only to
// the routes that accept IR.
func TestExternalIR(t *testing.T) {
	cohortPath, c := addCase(t)
	dir := t.TempDir()
	ll, abi := filepath.Join(dir, "a.ll"), filepath.Join(dir, "abi.json")
	must(t, os.WriteFile(ll, []byte("define void @my_entry() { ret void }\n"), 0o644))
	must(t, os.WriteFile(abi, []byte(`{"symbol": "my_entry", "op": "add", "dims": {"M": 2, "N": 3}, "dtype": "f32", "params": []}`), 0o644))
	arr, notJSON := filepath.Join(dir, "arr.json"), filepath.Join(dir, "bad.json")
	must(t, os.WriteFile(arr, []byte(`[1, 2]`), 0o644))
	must(t, os.WriteFile(notJSON, []byte(`{"symbol": `), 0o644))
	sub := filepath.Join(dir, "sub")
	must(t, os.Mkdir(sub, 0o755))
	must(t, os.WriteFile(filepath.Join(sub, "a.ll"), []byte("; other\n"), 0o644))
	fi, err := os.Stat(sub)
	must(t, err)
	files := map[string][]byte{"k.o": nil, "k.c": nil}
	plain := newFakeRoute(t, "plain", "", builtResponse(c), files)
	accepting := newFakeRoute(t, "orcish", `, "accepts_ir": true`, builtResponse(c), files)

	for _, tc := range []struct {
		name   string
		ir     []string
		abi    string
		routes []string
		want   string
	}{
		{"ir without abi", []string{ll}, "", []string{accepting}, "--ir without --abi: give both or neither"},
		{"abi without ir", nil, abi, []string{accepting}, "--abi without --ir: give both or neither"},
		{"missing ir", []string{filepath.Join(dir, "nope.ll")}, abi, []string{accepting}, "--ir: lstat " + filepath.Join(dir, "nope.ll") + ": no such file or directory"},
		{"ir is a directory", []string{sub}, abi, []string{accepting}, fmt.Sprintf("--ir: %s: not a regular file (mode %s)", sub, fi.Mode())},
		{"same base name", []string{ll, filepath.Join(sub, "a.ll")}, abi, []string{accepting},
			fmt.Sprintf("--ir: %s and %s have the same base name a.ll (each is stored as external/ir/NAME)", ll, filepath.Join(sub, "a.ll"))},
		{"missing abi", []string{ll}, filepath.Join(dir, "nope.json"), []string{accepting}, "--abi: lstat " + filepath.Join(dir, "nope.json") + ": no such file or directory"},
		{"abi is an array", []string{ll}, arr, []string{accepting}, "--abi " + arr + ": want a JSON object (docs/protocol.md, external IR), got an array"},
		{"abi is not JSON", []string{ll}, notJSON, []string{accepting}, "--abi " + notJSON + ": want a JSON object (docs/protocol.md, external IR): unexpected end of JSON input"},
		{"no route accepts IR", []string{ll}, abi, []string{plain}, "--ir: no selected route accepts IR (routes: plain)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCapture(t, Config{Cohort: cohortPath, RouteExec: tc.routes, IR: tc.ir, ABI: tc.abi})
			if err == nil || err.Error() != tc.want {
				t.Errorf("capture = %v, want %q", err, tc.want)
			}
		})
	}

	t.Run("accepted", func(t *testing.T) {
		wd, err := os.Getwd()
		must(t, err)
		rel, err := filepath.Rel(wd, ll)
		must(t, err)
		out := filepath.Join(t.TempDir(), "capture")
		res, err := runCapture(t, Config{Cohort: cohortPath, RouteExec: []string{plain, accepting}, IR: []string{rel}, ABI: abi, Output: out})
		if err != nil {
			t.Fatalf("capture: %v", err)
		}
		ext := res.Doc.External
		if ext == nil || len(ext.IR) != 1 || ext.IR[0].Title != "external/ir/a.ll" || ext.IR[0].Source != ll || ext.ABI.Title != "external/abi.json" || ext.ABI.Source != abi {
			t.Fatalf("capture external = %+v, want a.ll and abi.json with their absolute sources", ext)
		}
		if !res.Doc.Routes[1].AcceptsIR || res.Doc.Routes[0].AcceptsIR {
			t.Errorf("routes acceptsIR = %t, %t; want false, true", res.Doc.Routes[0].AcceptsIR, res.Doc.Routes[1].AcceptsIR)
		}
		if _, ok := readJSON(t, filepath.Join(filepath.Dir(plain), "case.json"))["ir"]; ok {
			t.Error("the route that does not accept IR was given ir in its case file")
		}
		got, _ := readJSON(t, filepath.Join(filepath.Dir(accepting), "case.json"))["ir"].(map[string]any)
		fs, _ := got["files"].([]any)
		p, _ := got["abi"].(string)
		if len(fs) != 1 || !filepath.IsAbs(fs[0].(string)) || filepath.Base(fs[0].(string)) != "a.ll" || !filepath.IsAbs(p) {
			t.Errorf("case file ir = %v, want one absolute a.ll and an absolute abi", got)
		}
		st, err := artifacts.OpenStage(out, artifacts.CaptureType, nil)
		must(t, err)
		for _, f := range []artifacts.ExternalFile{ext.IR[0], ext.ABI} {
			l, err := st.Layer(f.Title)
			if err != nil || l.Digest != f.Digest {
				t.Errorf("layer %s = %v (%v), want %s", f.Title, l.Digest, err, f.Digest)
				continue
			}
			want, err := os.ReadFile(f.Source)
			must(t, err)
			if got, err := os.ReadFile(st.Store.Path(f.Digest)); err != nil || !bytes.Equal(got, want) {
				t.Errorf("layer %s does not hold the bytes of %s", f.Title, f.Source)
			}
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(accepting), "input-A.bin")); err == nil {
			t.Error("a route that does not validate was given inputs")
		}
	})
}

// TestObjectEnv: an object build may set OpenBLAS's core type for its
// visits and nothing else: its visits run tilepipe's timer, so a variable
// that reaches the loader or the C library (the adversary's LD_PRELOAD, a
// GLIBC_TUNABLES) fails the build naming it, as does a value that is not
// a plain word.
func TestObjectEnv(t *testing.T) {
	cohortPath, c := addCase(t)
	files := map[string][]byte{"k.o": nil, "k.c": nil}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		status string
		reason string
	}{
		{"core type", map[string]string{"OPENBLAS_CORETYPE": "SkylakeX"}, artifacts.StatusBuilt, ""},
		{"LD_PRELOAD", map[string]string{"OPENBLAS_CORETYPE": "SkylakeX", "LD_PRELOAD": "/tmp/fake_clock.so"}, artifacts.StatusFailed,
			"route fake build: response env.LD_PRELOAD: an object build's visits run tilepipe's timer, which takes only OPENBLAS_CORETYPE"},
		{"GLIBC_TUNABLES", map[string]string{"GLIBC_TUNABLES": "glibc.malloc.perturb=0"}, artifacts.StatusFailed,
			"route fake build: response env.GLIBC_TUNABLES: an object build's visits run tilepipe's timer, which takes only OPENBLAS_CORETYPE"},
		{"value with a path", map[string]string{"OPENBLAS_CORETYPE": "../x"}, artifacts.StatusFailed,
			`route fake build: response env.OPENBLAS_CORETYPE "../x": want 1 to 32 letters, digits or underscores`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := builtResponse(c)
			resp["env"] = tc.env
			res, err := runCapture(t, Config{Cohort: cohortPath, RouteExec: []string{newFakeRoute(t, "fake", "", resp, files)}})
			if err != nil {
				t.Fatalf("capture: %v", err)
			}
			b := res.Doc.Cases[0].Builds[0]
			if b.Status != tc.status || b.Reason != tc.reason {
				t.Errorf("build = %s %q, want %s %q", b.Status, b.Reason, tc.status, tc.reason)
			}
			if tc.status == artifacts.StatusBuilt && !maps.Equal(b.Env, tc.env) {
				t.Errorf("build env = %v, want %v", b.Env, tc.env)
			}
		})
	}
}

// TestCacheFilesUnderCache: a process build's cache files are stored
// under their paths with role cache; one outside cache/ is refused with
// its index and path.
func TestCacheFilesUnderCache(t *testing.T) {
	work := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(work, "cache", "triton"), 0o755))
	for _, n := range []string{"w.py", "cache/triton/k.cubin", "k.cubin"} {
		must(t, os.WriteFile(filepath.Join(work, n), []byte(n), 0o644))
	}
	s, err := artifacts.Create(filepath.Join(t.TempDir(), "store"))
	must(t, err)
	route := artifacts.Route{Name: "jit", Kind: artifacts.KindProcess}
	for _, tc := range []struct {
		cache, want string
	}{
		{"cache/triton/k.cubin", ""},
		{"k.cubin", `response files[1].path "k.cubin": a cache file is under cache/ (a visit sees that directory as $TILEPIPE_CACHE)`},
	} {
		resp := response{Kind: artifacts.KindProcess, Files: []responseFile{{Path: "w.py", Role: "wrapper"}, {Path: tc.cache, Role: "cache"}}}
		var b artifacts.Build
		err := storeFiles(s, &b, resp, route, nil, work, "cases/x/jit/")
		if got := fmt.Sprint(err); (tc.want == "" && err != nil) || (tc.want != "" && got != tc.want) {
			t.Errorf("cache file %s: storeFiles = %v, want %q", tc.cache, err, tc.want)
		}
		if tc.want == "" && (len(b.Files) != 2 || b.Files[1].Role != artifacts.RoleCache || b.Files[1].Path != tc.cache) {
			t.Errorf("files = %+v, want the wrapper and the cache file with role cache", b.Files)
		}
	}
}
