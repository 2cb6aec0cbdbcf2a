package capture

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestValidate: every bound of Config.Validate, at both ends.
func TestValidate(t *testing.T) {
	base := DefaultConfig
	base.Threads, base.Jobs = 2, 2
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"defaults", func(c *Config) {}, ""},
		{"threads 0", func(c *Config) { c.Threads = 0 }, "--threads: want 1 to 1024, got 0"},
		{"threads 1", func(c *Config) { c.Threads = 1 }, ""},
		{"threads 1024", func(c *Config) { c.Threads = 1024 }, ""},
		{"threads 1025", func(c *Config) { c.Threads = 1025 }, "--threads: want 1 to 1024, got 1025"},
		{"jobs 0", func(c *Config) { c.Jobs = 0 }, "--jobs: want 1 to 64, got 0"},
		{"jobs 1", func(c *Config) { c.Jobs = 1 }, ""},
		{"jobs 64", func(c *Config) { c.Jobs = 64 }, ""},
		{"jobs 65", func(c *Config) { c.Jobs = 65 }, "--jobs: want 1 to 64, got 65"},
		{"build timeout 0", func(c *Config) { c.BuildTimeout = 0 }, "--build-timeout-s: want 1 to 86400, got 0"},
		{"build timeout 0.5 s", func(c *Config) { c.BuildTimeout = 500 * time.Millisecond }, "--build-timeout-s: want 1 to 86400, got 0.5"},
		{"build timeout 1 s", func(c *Config) { c.BuildTimeout = time.Second }, ""},
		{"build timeout 86400 s", func(c *Config) { c.BuildTimeout = 86400 * time.Second }, ""},
		{"build timeout 86401 s", func(c *Config) { c.BuildTimeout = 86401 * time.Second }, "--build-timeout-s: want 1 to 86400, got 86401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.set(&c)
			got := ""
			if err := c.Validate(); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRunValidates: Run refuses a config out of range before it reads the
// cohort or creates the output directory.
func TestRunValidates(t *testing.T) {
	out := filepath.Join(t.TempDir(), "capture")
	cfg := Config{Cohort: "no such cohort", Output: out, Threads: 1, Jobs: 1, BuildTimeout: 0, NoSandbox: true}
	_, err := Run(context.Background(), cfg)
	if want := "--build-timeout-s: want 1 to 86400, got 0"; err == nil || err.Error() != want {
		t.Errorf("Run(build timeout 0) = %v, want %s", err, want)
	}
	if _, serr := os.Lstat(out); !os.IsNotExist(serr) {
		t.Errorf("Run(build timeout 0) left %s: %v", out, serr)
	}
}

// slowRoute describes itself at once (or after SLOW_DESCRIBE seconds,
// from a file beside it) and takes 30 s to build: longer than any build
// timeout the tests give it.
const slowRoute = `#!/bin/sh
here=$(dirname "$0")
if [ "$1" = describe ]; then
  [ -f "$here/slow-describe" ] && sleep 30
  echo '{"protocol": 1, "name": "slow", "kind": "object", "version": "slow 1", "available": true, "reason": "", "ops": ["add"]}'
  exit 0
fi
exec sleep 30
`

// TestBuildTimeout: --build-timeout-s bounds a real route program's build
// (the row fails naming the timeout and the flag) and its describe.
func TestBuildTimeout(t *testing.T) {
	cohortPath, _ := addCase(t)
	route := filepath.Join(t.TempDir(), "route")
	must(t, os.WriteFile(route, []byte(slowRoute), 0o755))
	cfg := Config{Cohort: cohortPath, RouteExec: []string{route}, Output: filepath.Join(t.TempDir(), "capture"),
		Threads: 1, Jobs: 1, BuildTimeout: time.Second, NoSandbox: true}
	t0 := time.Now()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("capture with --build-timeout-s 1 took %s", d)
	}
	b := res.Doc.Cases[0].Builds[0]
	if want := "route slow build: timed_out: after 1s (--build-timeout-s 1)"; b.Status != "failed" || b.Reason != want {
		t.Errorf("build = %s %q, want failed %q", b.Status, b.Reason, want)
	}

	must(t, os.WriteFile(filepath.Join(filepath.Dir(route), "slow-describe"), nil, 0o644))
	cfg.Output = filepath.Join(t.TempDir(), "capture")
	_, err = Run(context.Background(), cfg)
	if want := "route " + route + ": describe: timed_out: after 1s"; err == nil || err.Error() != want {
		t.Errorf("capture with a slow describe = %v, want %s", err, want)
	}
	if _, serr := os.Lstat(cfg.Output); !os.IsNotExist(serr) {
		t.Errorf("the capture whose describe hung left %s (%v)", cfg.Output, serr)
	}
}

// TestInterruptedCaptureLeavesNothing: a capture cancelled while a route
// builds (as SIGINT or SIGTERM does) records no spurious "crashed" build:
// it returns the interruption and removes its output directory, so the
// same command can simply run again.
func TestInterruptedCaptureLeavesNothing(t *testing.T) {
	cohortPath, _ := addCase(t)
	route := filepath.Join(t.TempDir(), "route")
	must(t, os.WriteFile(route, []byte(slowRoute), 0o755))
	out := filepath.Join(t.TempDir(), "capture")
	cfg := Config{Cohort: cohortPath, RouteExec: []string{route}, Output: out, Threads: 1, Jobs: 1, BuildTimeout: time.Minute, NoSandbox: true}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	t0 := time.Now()
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted capture = %v, want context.Canceled", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("interrupted capture took %s to stop", d)
	}
	if _, serr := os.Lstat(out); !os.IsNotExist(serr) {
		t.Errorf("interrupted capture left %s (%v)", out, serr)
	}
}

// TestFailedRouteLeavesNothing: a --route-exec that cannot describe itself
// (missing, not executable, garbage) fails the capture after its
// directory was created; the directory goes with it, so a retry is not
// refused with "already exists".
func TestFailedRouteLeavesNothing(t *testing.T) {
	cohortPath, _ := addCase(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	must(t, os.WriteFile(garbage, []byte("#!/bin/sh\necho not json\n"), 0o755))
	noexec := filepath.Join(dir, "noexec")
	must(t, os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644))
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct{ route, want string }{
		{missing, "route program " + missing + ": stat " + missing + ": no such file or directory (run make build for the built-in routes)"},
		{noexec, "route " + noexec + ": describe: run " + noexec + ": fork/exec " + noexec + ": permission denied"},
		{garbage, "route " + garbage + ": describe: stdout: want one JSON object (docs/protocol.md): invalid character 'o' in literal null (expecting 'u')"},
	} {
		out := filepath.Join(t.TempDir(), "capture")
		cfg := Config{Cohort: cohortPath, RouteExec: []string{tc.route}, Output: out, Threads: 1, Jobs: 1, BuildTimeout: 10 * time.Second, NoSandbox: true}
		_, err := Run(context.Background(), cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("route %s: capture = %v, want %s", filepath.Base(tc.route), err, tc.want)
		}
		if _, serr := os.Lstat(out); !os.IsNotExist(serr) {
			t.Errorf("route %s: the failed capture left %s (%v)", filepath.Base(tc.route), out, serr)
		}
	}
}
