package artifacts_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/tilepipe/tilepipe/artifacts"
)

func TestRun(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	t.Setenv("TP_TEST_OLD", "old")
	tests := []struct {
		name       string
		argv       []string
		env        map[string]string
		timeout    time.Duration
		wantExit   int
		wantReason string
		wantStdout string
		wantStderr string
	}{
		{
			name:       "success",
			argv:       []string{"sh", "-c", "printf out; printf err >&2"},
			wantStdout: "out",
			wantStderr: "err",
		},
		{
			name:       "non-zero exit",
			argv:       []string{"sh", "-c", "echo first >&2; echo boom >&2; exit 3"},
			wantExit:   3,
			wantReason: "exited: status 3: boom",
			wantStderr: "first\nboom\n",
		},
		{
			name:       "non-zero exit, silent",
			argv:       []string{"sh", "-c", "exit 1"},
			wantExit:   1,
			wantReason: "exited: status 1",
		},
		{
			name:       "killed by SIGKILL",
			argv:       []string{"sh", "-c", "kill -KILL $$"},
			wantExit:   -1,
			wantReason: "crashed: killed by signal 9 (killed)",
		},
		{
			name:       "killed by SIGSEGV",
			argv:       []string{"sh", "-c", "kill -SEGV $$"},
			wantExit:   -1,
			wantReason: "crashed: killed by signal 11 (segmentation fault)",
		},
		{
			name:       "timeout",
			argv:       []string{"sleep", "10"},
			timeout:    50 * time.Millisecond,
			wantExit:   -1,
			wantReason: "timed_out: after 50ms",
		},
		{
			name:       "env delta added and overriding",
			argv:       []string{"sh", "-c", `printf '%s,%s' "$TP_TEST_NEW" "$TP_TEST_OLD"`},
			env:        map[string]string{"TP_TEST_NEW": "new", "TP_TEST_OLD": "replaced"},
			wantStdout: "new,replaced",
		},
		{
			name:       "env scrubbed",
			argv:       []string{"sh", "-c", `printf '%s,%s' "$TP_TEST_OLD" "${PATH:+path}"`},
			wantStdout: ",path",
		},
		{
			name:       "left-behind process killed, its pipe released",
			argv:       []string{"sh", "-c", "sleep 30 & printf started"},
			wantStdout: "started",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := artifacts.TestStore(t)
			dir := t.TempDir()
			cmd, stdout, reason, err := s.Run(context.Background(), tt.argv, dir, tt.env, tt.timeout)
			if err != nil {
				t.Fatalf("Run(%q) error = %v, want nil", tt.argv, err)
			}
			if cmd.Exit != tt.wantExit || reason != tt.wantReason {
				t.Errorf("Run(%q) = exit %d, reason %q, want exit %d, reason %q", tt.argv, cmd.Exit, reason, tt.wantExit, tt.wantReason)
			}
			if string(stdout) != tt.wantStdout {
				t.Errorf("Run(%q) stdout = %q, want %q", tt.argv, stdout, tt.wantStdout)
			}
			if !reflect.DeepEqual(cmd.Argv, tt.argv) || !reflect.DeepEqual(cmd.EnvDelta, tt.env) || cmd.Dir != dir {
				t.Errorf("Run(%q) command = %+v, want argv, env delta and dir recorded", tt.argv, cmd)
			}
			for _, o := range []struct {
				name string
				d    artifacts.Digest
				want string
			}{{"stdout", cmd.Stdout, tt.wantStdout}, {"stderr", cmd.Stderr, tt.wantStderr}} {
				if o.d != digest.FromString(o.want) {
					t.Errorf("Run(%q) %s digest = %s, want digest of %q", tt.argv, o.name, o.d, o.want)
					continue
				}
				b, err := s.ReadVerified(o.d, o.name, 1<<20)
				if err != nil || string(b) != o.want {
					t.Errorf("stored %s = %q, %v, want %q", o.name, b, err, o.want)
				}
			}
		})
	}
}

// TestRunPipeHeldOpen: a process that leaves its group (setsid) and keeps
// stdout open cannot hold Run: after PipeGrace the command is a result
// naming the held pipe.
func TestRunPipeHeldOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("long: waits out a held pipe; make test runs it")
	}
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	s := artifacts.TestStore(t)
	start := time.Now()
	argv := []string{"sh", "-c", "setsid sleep 20 & sleep 0.3; printf x"}
	cmd, _, reason, err := s.Run(context.Background(), argv, "", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("pipe_held_open: stdout or stderr still open %s after the command exited (a process it started outside its group holds it)", artifacts.PipeGrace)
	if cmd.Exit != -1 || reason != want {
		t.Errorf("Run(%q) = exit %d, reason %q, want -1, %q", argv, cmd.Exit, reason, want)
	}
	if d := time.Since(start); d > artifacts.PipeGrace+5*time.Second {
		t.Errorf("Run(%q) took %s, want about %s", argv, d, artifacts.PipeGrace)
	}
}

func TestRunCouldNotRun(t *testing.T) {
	s := artifacts.TestStore(t)
	tests := []struct {
		name string
		ctx  func() context.Context
		argv []string
		want string
	}{
		{
			name: "no such program",
			ctx:  context.Background,
			argv: []string{"/nonexistent/tilepipe-test-prog"},
			want: "run /nonexistent/tilepipe-test-prog: fork/exec /nonexistent/tilepipe-test-prog: no such file or directory",
		},
		{
			name: "empty argv",
			ctx:  context.Background,
			argv: nil,
			want: "run: empty argv",
		},
		{
			name: "cancelled",
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			argv: []string{"sleep", "10"},
			want: "context canceled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := s.Run(tt.ctx(), tt.argv, "", nil, 0)
			if errString(err) != tt.want {
				t.Errorf("Run(%q) = %v, want %s", tt.argv, err, tt.want)
			}
		})
	}
}

func TestRunOutputTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 64 MiB")
	}
	if _, err := exec.LookPath("head"); err != nil {
		t.Skip("no head")
	}
	s := artifacts.TestStore(t)
	argv := []string{"head", "-c", fmt.Sprint(artifacts.MaxOutputBytes + 1), "/dev/zero"}
	cmd, stdout, reason, err := s.Run(context.Background(), argv, "", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("output_too_large: more than %d bytes", artifacts.MaxOutputBytes)
	if cmd.Exit != -1 || reason != want || len(stdout) != artifacts.MaxOutputBytes {
		t.Errorf("Run(%q) = exit %d, reason %q, %d bytes, want exit -1, reason %q, %d bytes", argv, cmd.Exit, reason, len(stdout), want, artifacts.MaxOutputBytes)
	}
	if !bytes.Equal(stdout[:16], make([]byte, 16)) {
		t.Errorf("stdout starts %x, want zeros", stdout[:16])
	}
}

func TestFingerprint(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	e := artifacts.Fingerprint()
	if e.Kernel == "" || e.CPUs <= 0 || e.MemTotalKB <= 0 || e.OS != "linux" || e.Governor == "" {
		t.Errorf("Fingerprint() = kernel %q, cpus %d, memTotalKB %d, os %q, governor %q, want all set", e.Kernel, e.CPUs, e.MemTotalKB, e.OS, e.Governor)
	}
	t.Setenv("OMP_NUM_THREADS", "3")
	if got := artifacts.Fingerprint().EnvVars["OMP_NUM_THREADS"]; got != "3" {
		t.Errorf("Fingerprint().EnvVars[OMP_NUM_THREADS] = %q, want 3", got)
	}
}

func TestCPUFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: sse2 fma avx2\n\nprocessor\t: 1\nflags\t\t: sse2\n")
	if got, err := artifacts.CPUFlags(good); err != nil || !reflect.DeepEqual(got, []string{"avx2", "fma", "sse2"}) {
		t.Errorf("CPUFlags(good) = %v, %v; want the first CPU's flags, sorted", got, err)
	}
	noFlags := write("arm", "processor\t: 0\nFeatures\t: fp asimd\n")
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct{ path, want string }{
		{noFlags, noFlags + ": no flags line"},
		{missing, "open " + missing + ": no such file or directory"},
	} {
		if got, err := artifacts.CPUFlags(tc.path); err == nil || err.Error() != tc.want {
			t.Errorf("CPUFlags(%s) = %v, %v; want error %q", tc.path, got, err, tc.want)
		}
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		got, err := artifacts.CPUFlags(artifacts.CPUInfoPath)
		if err != nil || !reflect.DeepEqual(got, artifacts.Fingerprint().CPUFlags) {
			t.Errorf("CPUFlags(%s) = %v, %v; want the fingerprint's flags", artifacts.CPUInfoPath, got, err)
		}
	}
}

func TestToolInfo(t *testing.T) {
	ti := artifacts.ToolInfo()
	if ti.Name != "tilepipe" || ti.Version == "" || ti.Go != runtime.Version() {
		t.Errorf("ToolInfo() = %+v, want name tilepipe, a version and Go %s", ti, runtime.Version())
	}
}
