package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/adaptive"
	"github.com/tilepipe/tilepipe/internal/testroute"
	"github.com/tilepipe/tilepipe/report"
)

// adaptiveRun runs two copies of the naive route (an A/A pair: the ratio
// is 1 but for noise) on two cases with the adaptive flags given, and
// returns the run directory and its replay document.
func adaptiveRun(t *testing.T, flags ...string) (string, artifacts.ReplayDoc) {
	t.Helper()
	second := secondNaive(t)
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"run", "--cohort", tinyCohort(t, gemm16+", "+add3x7), "--routes", "", "--route-exec", testroute.Path(t),
		"--route-exec", second, "--baseline", "naive", "--rounds", "2", "--output", dir}, fast[:len(fast)-2]...)
	if code, out, errs := tp(t, append(args, flags...)...); code != exitOK {
		t.Fatalf("run = exit %d:\n%s%s", code, out, errs)
	}
	return dir, readReplay(t, filepath.Join(dir, "replay"))
}

// TestAdaptiveRounds: the stopping rule as replay applies it and as the
// audit re-derives it. With a target no 4 rounds can reach (an exact
// interval needs 6) and at most 4 rounds, both cases get two blocks and
// stop at the most rounds; with visits longer than the budget allows
// (warm-up 600 ms, budget 1 s) both stop at the first boundary, budget
// spent. The audit passes both, with the plan the stops give; a stop
// relabelled "target reached" and a case cut short are caught by the
// stopping rule check, naming the stops the samples give.
func TestAdaptiveRounds(t *testing.T) {
	long(t)
	dir, doc := adaptiveRun(t, "--target", "0.1", "--budget-s", "1000", "--max-rounds", "4")
	want := []artifacts.CaseStop{{Case: "gemm-16x16x16", Rounds: 4, Stop: adaptive.StopRounds}, {Case: "add-3x7", Rounds: 4, Stop: adaptive.StopRounds}}
	if !slices.Equal(doc.Stops, want) || len(doc.Plan) != 2*2*4 || doc.Config.Target != 0.001 || doc.Config.MaxRounds != 4 {
		t.Fatalf("stops %+v, %d planned visits, target %g, max rounds %d; want %+v, 16, 0.001, 4", doc.Stops, len(doc.Plan), doc.Config.Target, doc.Config.MaxRounds, want)
	}
	md := report.Table(doc)
	if w := "Adaptive rounds: after 2 rounds, a case got blocks of 2 more until every paired ratio's exact 97.5% interval was within ±0.1% of its median, a row had spent 1000 s of visits, or it had 4 rounds. 0 of 2 ratio rows reached the target; short of it: gemm-16x16x16 naive2 (no interval); add-3x7 naive2 (no interval). Cases stopped: gemm-16x16x16 after 4 rounds (most rounds); add-3x7 after 4 rounds (most rounds).\n"; !strings.Contains(md, w) {
		t.Errorf("results table: want\n%s\nin\n%s", w, md)
	}
	code, out := auditRun(t, dir, filepath.Join(dir, "replay"))
	if w := "audit: PASSED stopping rule: re-derived where 2 cases stopped (target ±0.1%, budget 1000 s a row, at most 4 rounds); 0 of 2 ratio rows reached the target"; code != exitOK || !strings.Contains(out, w) {
		t.Errorf("audit = exit %d, want 0 and %q:\n%s", code, w, out)
	}

	for _, tc := range []struct {
		name   string
		mutate func(d *artifacts.ReplayDoc)
		want   []string
	}{
		{"stop relabelled", func(d *artifacts.ReplayDoc) { d.Stops[0].Stop = adaptive.StopTarget }, []string{"audit: FAILED stopping rule: ",
			"- stops [{gemm-16x16x16 4 target reached} {add-3x7 4 most rounds}], the rule gives [{gemm-16x16x16 4 most rounds} {add-3x7 4 most rounds}] from the recorded samples\n"}},
		{"case cut short", func(d *artifacts.ReplayDoc) { d.Stops[1].Rounds = 2 }, []string{"audit: FAILED stopping rule: ",
			"- stops [{gemm-16x16x16 4 most rounds} {add-3x7 2 most rounds}], the rule gives [{gemm-16x16x16 4 most rounds} {add-3x7 4 most rounds}] from the recorded samples\n",
			"- add-3x7/naive planned 4 times, want one visit per round (2)\n"}},
		// 95% at every look gives narrower intervals, which stop sooner and
		// call identical binaries different more often than 5%.
		{"interval level lowered", func(d *artifacts.ReplayDoc) { d.Config.Level = artifacts.LevelFixed }, []string{"audit: FAILED summaries: ",
			"- config.level 0.95: the rule gives 0.975 to a replay of target 0.001 (or absent, in a replay made before it)\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forged := copyRun(t, dir)
			forgeStage(t, filepath.Join(forged, "replay"), artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, _ *artifacts.Receipt) {
				tc.mutate(d)
				relayer(t, st, "results.md", func([]byte) []byte { return []byte(report.Table(*d)) })
			})
			code, out := auditRun(t, forged, filepath.Join(forged, "replay"))
			for _, w := range tc.want {
				if code != exitFailure || !strings.Contains(out, w) {
					t.Errorf("audit = exit %d, want 1 and %q:\n%s", code, w, out)
				}
			}
			if strings.Contains(out, "FAILED results table") {
				t.Errorf("the forger re-rendered results.md, yet the results table check failed:\n%s", out)
			}
		})
	}

	dir, doc = adaptiveRun(t, "--target", "0.1", "--budget-s", "1", "--warmup-ms", "600")
	want = []artifacts.CaseStop{{Case: "gemm-16x16x16", Rounds: 2, Stop: adaptive.StopBudget}, {Case: "add-3x7", Rounds: 2, Stop: adaptive.StopBudget}}
	if !slices.Equal(doc.Stops, want) || len(doc.Plan) != 2*2*2 || doc.Config.MaxRounds != 120 {
		t.Errorf("stops %+v, %d planned visits, max rounds %d; want %+v, 8, 120 (the default)", doc.Stops, len(doc.Plan), doc.Config.MaxRounds, want)
	}
	if code, out := auditRun(t, dir, filepath.Join(dir, "replay")); code != exitOK || !strings.Contains(out, "audit: PASSED stopping rule: re-derived where 2 cases stopped") {
		t.Errorf("audit of the budget-stopped replay = exit %d:\n%s", code, out)
	}

	// The replay's budget: 8 visits of at least 600 ms spend about 6 s of
	// the 7, and a case's next block (4 visits) costs about 3 s, so both
	// stop at the first boundary. Forged into a larger budget everywhere,
	// the rule the audit applies gives them more rounds.
	dir, doc = adaptiveRun(t, "--target", "0.1", "--budget-s", "1000", "--budget", "7s", "--warmup-ms", "600")
	want = []artifacts.CaseStop{{Case: "gemm-16x16x16", Rounds: 2, Stop: adaptive.StopReplayBudget}, {Case: "add-3x7", Rounds: 2, Stop: adaptive.StopReplayBudget}}
	if !slices.Equal(doc.Stops, want) || len(doc.Plan) != 2*2*2 || doc.Config.TotalBudgetS != 7 {
		t.Errorf("stops %+v, %d planned visits, replay budget %g s; want %+v, 8, 7 s", doc.Stops, len(doc.Plan), doc.Config.TotalBudgetS, want)
	}
	if w := "a row had spent 1000 s of visits, what was left of the replay's 7s of visits could not pay for its next block, or it had 120 rounds."; !strings.Contains(report.Table(doc), w) {
		t.Errorf("results table: want %q in\n%s", w, report.Table(doc))
	}
	if code, out := auditRun(t, dir, filepath.Join(dir, "replay")); code != exitOK || !strings.Contains(out, "audit: PASSED stopping rule: re-derived where 2 cases stopped (target ±0.1%, budget 1000 s a row, 7 s for the replay, at most 120 rounds)") {
		t.Errorf("audit of the replay-budget replay = exit %d:\n%s", code, out)
	}
	forged := copyRun(t, dir)
	forgeStage(t, filepath.Join(forged, "replay"), artifacts.ReplayType, nil, func(st *artifacts.Stage, d *artifacts.ReplayDoc, r *artifacts.Receipt) {
		reconfigure(t, st, d, r, func(c *artifacts.ReplayConfig) { c.TotalBudgetS = 1000 })
	})
	if code, out := auditRun(t, forged, filepath.Join(forged, "replay")); code != exitFailure || !strings.Contains(out, "- stops [{gemm-16x16x16 2 replay budget spent} {add-3x7 2 replay budget spent}], the rule gives [{gemm-16x16x16 120 most rounds} {add-3x7 120 most rounds}] from the recorded samples\n") {
		t.Errorf("audit of a replay budget forged larger = exit %d:\n%s", code, out)
	}
}

// TestAdaptiveResume kills an adaptive replay inside its adaptive rounds
// (SIGKILL after 10 visits: the fixed rounds hold 8) and resumes it: the
// rule, applied again to the journaled visits, gives the same plan, and
// the audit passes (its journal check finds every visit recorded once).
func TestAdaptiveResume(t *testing.T) {
	long(t)
	dir, _ := adaptiveRun(t, "--target", "0", "--rounds", "1")
	rep := filepath.Join(dir, "replay-adaptive")
	args := append([]string{"replay", "--prepared", filepath.Join(dir, "prepared"), "--output", rep, "--baseline", "naive",
		"--rounds", "2", "--target", "0.1", "--budget-s", "1000", "--max-rounds", "6"}, fast[:len(fast)-2]...)
	cmd, stderr := startReplay(t, args, rep, 10)
	cmd.Process.Kill()
	cmd.Wait()
	if code, out, errs := tp(t, append(args, "--resume")...); code != exitOK {
		t.Fatalf("replay --resume = exit %d (killed run: %s)\n%s%s", code, stderr, out, errs)
	}
	doc := readReplay(t, rep)
	want := []artifacts.CaseStop{{Case: "gemm-16x16x16", Rounds: 6, Stop: adaptive.StopRounds}, {Case: "add-3x7", Rounds: 6, Stop: adaptive.StopRounds}}
	if !slices.Equal(doc.Stops, want) || len(doc.Visits) != 24 {
		t.Errorf("resumed: stops %+v, %d visits; want %+v and 24 visits (the audit's journal check counts each once)", doc.Stops, len(doc.Visits), want)
	}
	if code, out := auditRun(t, dir, rep); code != exitOK {
		t.Errorf("audit of the resumed adaptive replay = exit %d:\n%s", code, out)
	}
}
