package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLimits: every numeric flag of capture, prepare, replay and run, just
// outside its range at both ends (docs/limits.md), is a usage error (exit
// 2) naming the command, the flag, the range and the value, found before
// anything is read or written: --output is never created.
func TestLimits(t *testing.T) {
	usage := func(cmd, msg string) string {
		return "tilepipe: error: " + cmd + ": " + msg + "\ntilepipe: hint: tilepipe help\n"
	}
	type limit struct {
		flag, low, high, want string // want: the message after "FLAG: ", with %s for the value
	}
	replayLimits := []limit{
		{"--rounds", "-1", "1001", "want 1 to 1000 (or 0: the cohort's default), got "},
		{"--samples", "0", "1001", "want 1 to 1000, got "},
		{"--singles", "-1", "1001", "want 0 to 1000, got "},
		{"--sets", "1", "65", "want 2 to 64, got "},
		{"--sample-ms", "0.09", "60000.5", "want 0.1 to 60000, got "},
		{"--warmup-ms", "-1", "60001", "want 0 to 60000, got "},
		{"--timeout-s", "0", "86401", "want 1 to 86400, got "},
		{"--target", "0.09", "50.5", "want 0.1 to 50, got "},
		{"--budget-s", "0.5", "86401", "want 1 to 86400, got "},
		{"--max-rounds", "-1", "1001", "want 1 to 1000, got "},
		{"--threads", "0", "1025", "want 1 to 1024, got "},
	}
	captureLimits := []limit{
		{"--threads", "0", "1025", "want 1 to 1024, got "},
		{"--jobs", "0", "65", "want 1 to 64, got "},
		{"--build-timeout-s", "0", "86401", "want 1 to 86400, got "},
	}
	prepareLimits := []limit{{"--build-timeout-s", "0", "86401", "want 1 to 86400, got "}}
	runLimits := append(append([]limit(nil), captureLimits...), replayLimits[:len(replayLimits)-1]...) // run's --threads is capture's
	for _, cmd := range []struct {
		name   string
		args   []string // besides --output
		limits []limit
	}{
		{"capture", []string{"--cohort", "quick"}, captureLimits},
		{"prepare", []string{"--capture", "x"}, prepareLimits},
		{"replay", []string{"--prepared", "x"}, replayLimits},
		{"run", []string{"--cohort", "quick"}, runLimits},
	} {
		for _, l := range cmd.limits {
			for _, v := range []string{l.low, l.high} {
				t.Run(cmd.name+" "+l.flag+" "+v, func(t *testing.T) {
					out := filepath.Join(t.TempDir(), "out")
					args := append(append([]string{cmd.name}, cmd.args...), "--output", out, l.flag+"="+v)
					code, stdout, errs := tp(t, args...)
					if want := usage(cmd.name, l.flag+": "+l.want+v); code != exitUsage || errs != want {
						t.Errorf("tilepipe %v = exit %d, stderr %q; want exit %d, %q\n%s", args, code, errs, exitUsage, want, stdout)
					}
					if _, err := os.Lstat(out); !os.IsNotExist(err) {
						t.Errorf("tilepipe %v left %s: %v", args, out, err)
					}
				})
			}
		}
	}
}

// TestLimitsInside: the ends of the ranges pass the checks; what fails is
// the next step, opening the stage that is not there.
func TestLimitsInside(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--prepared", missing, "--rounds", "1000", "--samples", "1000", "--singles", "1000", "--sets", "64",
			"--sample-ms", "0.1", "--warmup-ms", "60000", "--timeout-s", "86400", "--threads", "1024"},
			"tilepipe: error: open stage: lstat " + missing + ": no such file or directory\n"},
		{[]string{"replay", "--prepared", missing, "--rounds", "1", "--samples", "1", "--singles", "0", "--sets", "2",
			"--sample-ms", "60000", "--warmup-ms", "0", "--timeout-s", "1", "--threads", "1", "--target", "0.1", "--budget-s", "1", "--max-rounds", "1"},
			"tilepipe: error: open stage: lstat " + missing + ": no such file or directory\n"},
		{[]string{"replay", "--prepared", missing, "--target", "50", "--budget-s", "86400", "--max-rounds", "1000"},
			"tilepipe: error: open stage: lstat " + missing + ": no such file or directory\n"},
		{[]string{"replay", "--prepared", missing, "--target", "0", "--budget-s", "0"}, // fixed rounds: no budget
			"tilepipe: error: open stage: lstat " + missing + ": no such file or directory\n"},
		{[]string{"prepare", "--capture", missing, "--build-timeout-s", "86400"}, "tilepipe: error: open stage: lstat " + missing + ": no such file or directory\n"},
		{[]string{"prepare", "--capture", missing, "--build-timeout-s", "1"}, "tilepipe: error: open stage: lstat " + missing + ": no such file or directory\n"},
		{[]string{"capture", "--cohort", missing, "--jobs", "64", "--threads", "1024", "--build-timeout-s", "1"},
			`tilepipe: error: cohort "` + missing + `": not a built-in cohort (cpu-default, cpu-full, gpu-default, gpu-llm, gpu-llm-quick, gpu-quick, llm-primitives, quick) and not a readable file: stat ` + missing + ": no such file or directory\n"},
		{[]string{"capture", "--cohort", missing, "--jobs", "1", "--threads", "1", "--build-timeout-s", "86400"},
			`tilepipe: error: cohort "` + missing + `": not a built-in cohort (cpu-default, cpu-full, gpu-default, gpu-llm, gpu-llm-quick, gpu-quick, llm-primitives, quick) and not a readable file: stat ` + missing + ": no such file or directory\n"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append(tc.args, "--output", out)
		if code, _, errs := tp(t, args...); code != exitFailure || errs != tc.want {
			t.Errorf("tilepipe %v = exit %d, stderr %q; want exit %d, %q", args, code, errs, exitFailure, tc.want)
		}
	}
}

// TestHugeRoundsRefusedFast: --rounds 100000000 (which once drew input
// seeds for every round and planned rounds x pairs visits until memory ran
// out) is refused at once, before anything is hashed or written.
func TestHugeRoundsRefusedFast(t *testing.T) {
	for _, cmd := range [][]string{{"replay", "--prepared", "x"}, {"run", "--cohort", "quick"}} {
		out := filepath.Join(t.TempDir(), "out")
		args := append(cmd, "--rounds", "100000000", "--output", out)
		t0 := time.Now()
		code, _, errs := tp(t, args...)
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("tilepipe %v took %s to refuse", args, d)
		}
		want := "tilepipe: error: " + cmd[0] + ": --rounds: want 1 to 1000 (or 0: the cohort's default), got 100000000\ntilepipe: hint: tilepipe help\n"
		if code != exitUsage || errs != want {
			t.Errorf("tilepipe %v = exit %d, stderr %q; want exit %d, %q", args, code, errs, exitUsage, want)
		}
		if _, err := os.Lstat(out); !os.IsNotExist(err) {
			t.Errorf("tilepipe %v left %s: %v", args, out, err)
		}
	}
}

// TestUnknownCaseParam: a case param its op does not use is refused when
// the cohort is loaded, naming the field, before anything is written.
func TestUnknownCaseParam(t *testing.T) {
	for _, tc := range []struct{ c, want string }{
		{`{"op": "add", "dims": {"M": 2, "N": 3}, "params": {"alpha": 2}}`, "case add-2x3: params.alpha: op add takes no parameters"},
		{`{"op": "layernorm", "dims": {"M": 2, "N": 8}, "params": {"eps": 1e-5, "alpha": 2}}`, "case layernorm-2x8: params.alpha: op layernorm takes only eps"},
	} {
		co := tinyCohort(t, tc.c)
		out := filepath.Join(t.TempDir(), "out")
		code, _, errs := tp(t, "capture", "--cohort", co, "--output", out)
		if want := "tilepipe: error: " + co + ":1: " + tc.want + "\n"; code != exitFailure || errs != want {
			t.Errorf("capture %s = exit %d, stderr %q; want exit %d, %q", tc.c, code, errs, exitFailure, want)
		}
		if _, err := os.Lstat(out); !os.IsNotExist(err) {
			t.Errorf("capture %s left %s: %v", tc.c, out, err)
		}
	}
}
