package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
)

// listerRoute is a process route whose wrapper, run with --closure,
// writes a scratch file under $TMPDIR (the listing's private writable
// directory, where torch-compile's listing compiles) and lists /bin/sh's
// file and the scratch file (prepare's own, never pinned); it sends closure_args unless its build is given
// TILEPIPE_TEST_PER_CASE=1.
const listerRoute = `#!/bin/sh
if [ "$1" = describe ]; then
  echo '{"protocol": 1, "name": "lister", "kind": "process", "version": "1", "available": true, "reason": "", "ops": ["add"]}'
  exit 0
fi
prev=""; for a; do [ "$prev" = "--workdir" ] && w="$a"; prev="$a"; done
printf '%s\n' '[ "$#" -gt 0 ] && for a; do [ "$a" = --closure ] && { echo x > "$TMPDIR/scratch" || exit 3; readlink -f /bin/sh; echo "$TMPDIR/scratch"; exit 0; }; done; exit 2' > "$w/wrapper.sh"
ca=', "closure_args": ["--device", "cpu"]'
[ "$TILEPIPE_TEST_PER_CASE" = 1 ] && ca=''
[ "$TILEPIPE_TEST_PER_CASE" = bad ] && ca=', "closure_args": ["--closure"]'
echo '{"protocol": 1, "status": "built", "kind": "process", "files": [{"path": "wrapper.sh", "role": "wrapper"}], "process": {"interpreter": "/bin/sh", "script": "wrapper.sh", "args": ["--case", "'"$w"'"], "env": {}, "output_policy": "out"'"$ca"'}}'
`

// TestClosureArgsRefused: closure arguments that hold --closure (which
// prepare adds) fail the build, naming the field.
func TestClosureArgsRefused(t *testing.T) {
	dir := t.TempDir()
	route := filepath.Join(dir, "lister")
	if err := os.WriteFile(route, []byte(listerRoute), 0o755); err != nil {
		t.Fatal(err)
	}
	capDir := filepath.Join(dir, "capture")
	if code, _, _ := tp(t, "capture", "--cohort", tinyCohort(t, add3x7), "--routes", "", "--route-exec", route, "--route-env", "TILEPIPE_TEST_PER_CASE=bad", "--output", capDir); code != exitFailure {
		t.Fatalf("capture = exit %d, want 1 (a failed row)", code)
	}
	b := readCapture(t, capDir).Cases[0].Builds[0]
	if want := `route lister build: response process.closure_args[0] "--closure": want a non-empty argument without NUL (prepare adds --closure itself)`; b.Status != artifacts.StatusFailed || b.Reason != want {
		t.Errorf("build = %s %q, want failed %q", b.Status, b.Reason, want)
	}
}

// TestClosureListedOnce: a process build that names its closure
// arguments is listed once for all its cases, each entry pinning the
// same files; one that does not is listed case by case, with its args.
func TestClosureListedOnce(t *testing.T) {
	long(t)
	dir := t.TempDir()
	route := filepath.Join(dir, "lister")
	if err := os.WriteFile(route, []byte(listerRoute), 0o755); err != nil {
		t.Fatal(err)
	}
	co := tinyCohort(t, add3x7+`, `+add5x33+`, {"op": "add", "dims": {"M": 4, "N": 10}, "seed": 9}`)
	for _, tc := range []struct {
		name     string
		env      []string
		listings int
		argv     string // the listing's arguments after the script
	}{
		{"closure_args", nil, 1, "--device cpu --closure"},
		{"per case", []string{"--route-env", "TILEPIPE_TEST_PER_CASE=1"}, 3, "--case "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := t.TempDir()
			capDir, prepDir := filepath.Join(run, "capture"), filepath.Join(run, "prepared")
			args := append([]string{"capture", "--cohort", co, "--routes", "", "--route-exec", route, "--output", capDir}, tc.env...)
			if code, _, errs := tp(t, args...); code != exitOK {
				t.Fatalf("capture = exit %d: %s", code, errs)
			}
			if code, _, errs := tp(t, "prepare", "--capture", capDir, "--output", prepDir); code != exitOK {
				t.Fatalf("prepare = exit %d: %s", code, errs)
			}
			rec, err := openStage(t, prepDir, artifacts.PreparedType).Receipt()
			if err != nil {
				t.Fatal(err)
			}
			var listings []string
			for _, c := range rec.Predicate.Commands {
				if slices.Contains(c.Argv, "--closure") {
					i := slices.IndexFunc(c.Argv, func(a string) bool { return strings.HasSuffix(a, "wrapper.sh") })
					listings = append(listings, strings.Join(c.Argv[i+1:], " "))
				}
			}
			if len(listings) != tc.listings || !strings.HasPrefix(listings[0], tc.argv) {
				t.Errorf("closure listings %q, want %d starting %q", listings, tc.listings, tc.argv)
			}
			sh, err := filepath.EvalSymlinks("/bin/sh")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range readPrepared(t, prepDir).Entries {
				if e.Status != artifacts.StatusPrepared || len(e.Closure) != 1 || e.Closure[0].Path != sh {
					t.Errorf("entry %s: %s %q closure %+v, want prepared with %s pinned", e.Case, e.Status, e.Reason, e.Closure, sh)
				}
			}
		})
	}
}

// cacheRoute is an object-less process route whose builds share a
// --cache directory when it describes one: each build appends its case to
// the cache's file and reports what the builds before it left there.
const cacheRoute = `#!/bin/sh
if [ "$1" = describe ]; then
  echo '{"protocol": 1, "name": "cacher", "kind": "process", "version": "1", "available": true, "reason": "", "ops": ["add"], "build_cache": true}'
  exit 0
fi
prev=""; for a; do [ "$prev" = "--workdir" ] && w="$a"; [ "$prev" = "--cache" ] && c="$a"; [ "$prev" = "--case" ] && k="$a"; prev="$a"; done
seen=$(cat "$c/seen" 2>/dev/null | tr '\n' ' ')
sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' "$k" >> "$c/seen" || exit 3
printf '%s\n' 'exit 2' > "$w/wrapper.sh"
echo '{"protocol": 1, "status": "built", "kind": "process", "files": [{"path": "wrapper.sh", "role": "wrapper"}], "process": {"interpreter": "/bin/sh", "script": "wrapper.sh", "args": [], "env": {}, "output_policy": "out"}, "schedule": {"seen": "'"$seen"'"}}'
`

// TestBuildCache: a route that describes a build cache gets --cache DIR
// in every build, one directory its builds share and can write inside the
// build sandbox (the second build sees what the first left); capture
// records it in the route.
func TestBuildCache(t *testing.T) {
	dir := t.TempDir()
	route := filepath.Join(dir, "cacher")
	if err := os.WriteFile(route, []byte(cacheRoute), 0o755); err != nil {
		t.Fatal(err)
	}
	capDir := filepath.Join(dir, "capture")
	if code, _, errs := tp(t, "capture", "--cohort", tinyCohort(t, add3x7+`, `+add5x33), "--routes", "", "--route-exec", route, "--jobs", "1", "--output", capDir); code != exitOK {
		t.Fatalf("capture = exit %d: %s", code, errs)
	}
	doc := readCapture(t, capDir)
	if !doc.Routes[0].BuildCache {
		t.Errorf("route %+v: want buildCache recorded", doc.Routes[0])
	}
	var seen []string
	for _, c := range doc.Cases {
		b := c.Builds[0]
		s, ok := b.Schedule["seen"].(string)
		if !ok || b.Status != artifacts.StatusBuilt {
			t.Fatalf("build %s: %s %q schedule %v", c.Case.ID, b.Status, b.Reason, b.Schedule)
		}
		seen = append(seen, s)
	}
	if want := []string{"", "add-3x7 "}; !slices.Equal(seen, want) {
		t.Errorf("what each build found in the cache: %q, want %q", seen, want)
	}
}
