package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/testroute"
)

// TestCompare recomputes a two-route run against each of its routes: with
// the run's own baseline it reproduces the stored summaries exactly, with
// the other route every ratio is that route's reciprocal pairing; unknown
// baselines, another prepared stage and a tampered sample table are refused.
func TestCompare(t *testing.T) {
	long(t)
	second := secondNaive(t)
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"run", "--cohort", tinyCohort(t, gemm16), "--routes", "", "--route-exec", testroute.Path(t),
		"--route-exec", second, "--baseline", "naive", "--rounds", "2", "--allow-load", "--output", dir}, fast...) // every round paired, however busy the machine
	if code, out, errs := tp(t, args...); code != exitOK {
		t.Fatalf("run = exit %d:\n%s%s", code, out, errs)
	}
	prep, rep := filepath.Join(dir, "prepared"), filepath.Join(dir, "replay")
	stored := readReplay(t, rep)

	compare := func(baseline string) (int, []artifacts.Summary, string) {
		code, out, errs := tp(t, "compare", "--prepared", prep, "--replay", rep, "--baseline", baseline, "--json")
		var got struct {
			Baseline string              `json:"baseline"`
			Summary  []artifacts.Summary `json:"summary"`
		}
		if code == exitOK {
			if err := json.Unmarshal([]byte(out), &got); err != nil || got.Baseline != baseline {
				t.Fatalf("compare --json: %v, baseline %q:\n%s", err, got.Baseline, out)
			}
		}
		return code, got.Summary, errs
	}
	if code, sum, errs := compare("naive"); code != exitOK || !reflect.DeepEqual(sum, stored.Summary) {
		t.Errorf("compare --baseline naive = exit %d %s\n%+v,\nwant the stored summaries\n%+v", code, errs, sum, stored.Summary)
	}
	code, sum, errs := compare("naive2")
	if code != exitOK {
		t.Fatalf("compare --baseline naive2 = exit %d: %s", code, errs)
	}
	for i, s := range sum {
		old := stored.Summary[i]
		switch s.Route {
		case "naive2":
			if s.RatioPairs != 0 || s.MedianNs != old.MedianNs {
				t.Errorf("naive2 as baseline: %+v, want no ratio and the same median as stored", s)
			}
		case "naive":
			if s.RatioPairs != 2 || s.Ratio <= 0 || old.RatioPairs != 0 {
				t.Errorf("naive against naive2: %+v (stored %+v), want 2 paired rounds", s, old)
			}
		}
	}
	if code, out, _ := tp(t, "compare", "--prepared", prep, "--replay", rep, "--baseline", "naive2"); code != exitOK || !strings.Contains(out, "ratio vs naive2") {
		t.Errorf("compare (table) = exit %d:\n%s", code, out)
	}

	if code, _, errs := compare("torch-eager"); code != exitFailure || errs != "tilepipe: error: --baseline \"torch-eager\": not a route of replay "+rep+" (routes: [naive naive2])\n" {
		t.Errorf("compare with an unknown baseline = exit %d, stderr %q", code, errs)
	}
	other := passingRun(t)
	if code, _, errs := tp(t, "compare", "--prepared", filepath.Join(other, "prepared"), "--replay", rep, "--baseline", "naive"); code != exitFailure || !strings.Contains(errs, "replay "+rep+": made from prepared sha256:") {
		t.Errorf("compare with another prepared stage = exit %d, stderr %q", code, errs)
	}
	forged := copyRun(t, dir)
	flipByte(t, layerPath(t, filepath.Join(forged, "replay"), artifacts.ReplayType, "samples.arrow"))
	if code, _, errs := tp(t, "compare", "--prepared", filepath.Join(forged, "prepared"), "--replay", filepath.Join(forged, "replay"), "--baseline", "naive"); code != exitFailure || !strings.Contains(errs, "blob samples.arrow (") || !strings.Contains(errs, "digest mismatch") {
		t.Errorf("compare over a tampered sample table = exit %d, stderr %q", code, errs)
	}
}
