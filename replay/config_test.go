package replay

import (
	"fmt"
	"math"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/sets"
	"github.com/tilepipe/tilepipe/oracle"
)

// TestValidate: every bound of Config.Validate, at both ends: the last
// value inside passes, the first outside is refused with its exact message.
func TestValidate(t *testing.T) {
	base := DefaultConfig
	base.Threads = 2
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"defaults", func(c *Config) {}, ""},
		{"rounds -1", func(c *Config) { c.Rounds = -1 }, "--rounds: want 1 to 1000 (or 0: the cohort's default), got -1"},
		{"rounds 0", func(c *Config) { c.Rounds = 0 }, ""},
		{"rounds 1", func(c *Config) { c.Rounds = 1 }, ""},
		{"rounds 1000", func(c *Config) { c.Rounds = 1000 }, ""},
		{"rounds 1001", func(c *Config) { c.Rounds = 1001 }, "--rounds: want 1 to 1000 (or 0: the cohort's default), got 1001"},
		{"rounds 1e8", func(c *Config) { c.Rounds = 100000000 }, "--rounds: want 1 to 1000 (or 0: the cohort's default), got 100000000"},
		{"samples 0", func(c *Config) { c.Samples = 0 }, "--samples: want 1 to 1000, got 0"},
		{"samples 1", func(c *Config) { c.Samples = 1 }, ""},
		{"samples 1000", func(c *Config) { c.Samples = 1000 }, ""},
		{"samples 1001", func(c *Config) { c.Samples = 1001 }, "--samples: want 1 to 1000, got 1001"},
		{"samples 1e9", func(c *Config) { c.Samples = 1000000000 }, "--samples: want 1 to 1000, got 1000000000"},
		{"singles -1", func(c *Config) { c.Singles = -1 }, "--singles: want 0 to 1000, got -1"},
		{"singles 0", func(c *Config) { c.Singles = 0 }, ""},
		{"singles 1000", func(c *Config) { c.Singles = 1000 }, ""},
		{"singles 1001", func(c *Config) { c.Singles = 1001 }, "--singles: want 0 to 1000, got 1001"},
		{"sets 1", func(c *Config) { c.Sets = 1 }, "--sets: want 2 to 64, got 1"},
		{"sets 2", func(c *Config) { c.Sets = 2 }, ""},
		{"sets 64", func(c *Config) { c.Sets = 64 }, ""},
		{"sets 65", func(c *Config) { c.Sets = 65 }, "--sets: want 2 to 64, got 65"},
		{"novel rule 1", func(c *Config) { c.NovelRule = 1 }, "novelRule 1: replay times by rule 3"},
		{"novel rule 2", func(c *Config) { c.NovelRule = 2 }, "novelRule 2: replay times by rule 3"},
		{"novel rule absent", func(c *Config) { c.NovelRule = 0 }, "novelRule 0: replay times by rule 3"},
		{"l2 flush", func(c *Config) { c.L2 = "flush" }, ""},
		{"graph batch", func(c *Config) { c.GraphBatch = 100 }, ""},
		{"graph batch negative", func(c *Config) { c.GraphBatch = -1 }, "--graph-batch: want 0 to 10000, got -1"},
		{"graph batch too large", func(c *Config) { c.GraphBatch = 10001 }, "--graph-batch: want 0 to 10000, got 10001"},
		{"l2 cold", func(c *Config) { c.L2 = "cold" }, `--l2: want warm or flush, got "cold"`},
		{"l2 empty", func(c *Config) { c.L2 = "" }, `--l2: want warm or flush, got ""`},
		{"sample-ms 0", func(c *Config) { c.SampleMs = 0 }, "--sample-ms: want 0.1 to 60000, got 0"},
		{"sample-ms 0.09", func(c *Config) { c.SampleMs = 0.09 }, "--sample-ms: want 0.1 to 60000, got 0.09"},
		{"sample-ms 0.1", func(c *Config) { c.SampleMs = 0.1 }, ""},
		{"sample-ms 60000", func(c *Config) { c.SampleMs = 60000 }, ""},
		{"sample-ms 60000.5", func(c *Config) { c.SampleMs = 60000.5 }, "--sample-ms: want 0.1 to 60000, got 60000.5"},
		{"sample-ms NaN", func(c *Config) { c.SampleMs = math.NaN() }, "--sample-ms: want 0.1 to 60000, got NaN"},
		{"warmup-ms -0.5", func(c *Config) { c.WarmupMs = -0.5 }, "--warmup-ms: want 0 to 60000, got -0.5"},
		{"warmup-ms 0", func(c *Config) { c.WarmupMs = 0 }, ""},
		{"warmup-ms 60000", func(c *Config) { c.WarmupMs = 60000 }, ""},
		{"warmup-ms 60001", func(c *Config) { c.WarmupMs = 60001 }, "--warmup-ms: want 0 to 60000, got 60001"},
		{"warmup-ms +Inf", func(c *Config) { c.WarmupMs = math.Inf(1) }, "--warmup-ms: want 0 to 60000, got +Inf"},
		{"timeout-s 0", func(c *Config) { c.TimeoutS = 0 }, "--timeout-s: want 1 to 86400, got 0"},
		{"timeout-s 0.5", func(c *Config) { c.TimeoutS = 0.5 }, "--timeout-s: want 1 to 86400, got 0.5"},
		{"timeout-s 1", func(c *Config) { c.TimeoutS = 1 }, ""},
		{"timeout-s 86400", func(c *Config) { c.TimeoutS = 86400 }, ""},
		{"timeout-s 86401", func(c *Config) { c.TimeoutS = 86401 }, "--timeout-s: want 1 to 86400, got 86401"},
		{"threads 0", func(c *Config) { c.Threads = 0 }, "--threads: want 1 to 1024, got 0"},
		{"threads 1", func(c *Config) { c.Threads = 1 }, ""},
		{"threads 1024", func(c *Config) { c.Threads = 1024 }, ""},
		{"threads 1025", func(c *Config) { c.Threads = 1025 }, "--threads: want 1 to 1024, got 1025"},
		{"target 0 (fixed rounds)", func(c *Config) { c.Target = 0 }, ""},
		{"target 0.05%", func(c *Config) { c.Target = 0.0005 }, "--target: want 0.1 to 50, got 0.05"},
		{"target 51%", func(c *Config) { c.Target = 0.51 }, "--target: want 0.1 to 50, got 51"},
		{"target -1%", func(c *Config) { c.Target = -0.01 }, "--target: want 0.1 to 50, got -1"},
		{"budget-s 0.5", func(c *Config) { c.BudgetS = 0.5 }, "--budget-s: want 1 to 86400, got 0.5"},
		{"budget-s 86401", func(c *Config) { c.BudgetS = 86401 }, "--budget-s: want 1 to 86400, got 86401"},
		{"budget 0 (none)", func(c *Config) { c.TotalBudgetS = 0 }, ""},
		{"budget 0.5 s", func(c *Config) { c.TotalBudgetS = 0.5 }, "--budget (seconds): want 1 to 604800, got 0.5"},
		{"budget a week", func(c *Config) { c.TotalBudgetS = 604800 }, ""},
		{"budget a week and a second", func(c *Config) { c.TotalBudgetS = 604801 }, "--budget (seconds): want 1 to 604800, got 604801"},
		{"budget negative", func(c *Config) { c.TotalBudgetS = -60 }, "--budget (seconds): want 1 to 604800, got -60"},
		{"max-rounds below rounds", func(c *Config) { c.Rounds, c.MaxRounds = 12, 8 }, "--max-rounds: want 12 to 1000, got 8"},
		{"max-rounds 1001", func(c *Config) { c.MaxRounds = 1001 }, "--max-rounds: want 1 to 1000, got 1001"},
		{"max-rounds 0 (the default)", func(c *Config) { c.MaxRounds = 0 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.set(&c)
			if got := errText(c.Validate()); got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// stagedReplayer is a replayer as Run has it after opening its stages: a
// capture of cases c0..c(n-1), every (case, route) prepared.
func stagedReplayer(cfg Config, cohortRounds, cases int, routes []string) *replayer {
	r := &replayer{cfg: cfg, cdoc: artifacts.CaptureDoc{Cohort: "t", Rounds: cohortRounds}, entries: map[artifacts.Pair]*artifacts.Prepared{}}
	for i := range cases {
		for _, rt := range routes {
			id := fmt.Sprintf("c%d", i)
			r.entries[artifacts.Pair{Case: id, Route: rt}] = &artifacts.Prepared{Case: id, Route: rt, Status: artifacts.StatusPrepared}
		}
	}
	return r
}

// TestCheckConfig: what depends on the prepared stage, with the rounds
// resolved as Run resolves them: the plan's size at its limit and over it
// (only prepared pairs count), the cohort's rounds out of range, the
// baseline, and the ranges again for library callers.
func TestCheckConfig(t *testing.T) {
	routes := []string{"a", "b"}
	cfg := DefaultConfig
	cfg.Threads, cfg.Baseline = 2, "a"
	for _, tc := range []struct {
		name         string
		rounds       int // resolved
		cohortRounds int
		cases        int
		failed       int // of the cases' entries for route b, made failed
		baseline     string
		want         string
	}{
		{"plan at the limit", 1000, 0, 50, 0, "a", ""},
		{"plan over the limit", 1000, 0, 51, 0, "a",
			"plan: 1000 rounds x 102 prepared (case, route) pairs = 102000 visits, limit 100000 (give fewer --rounds or --max-rounds, cases or routes)"},
		{"only prepared pairs count", 1000, 0, 51, 2, "a", ""},
		{"plan over the limit at fewer rounds", 500, 0, 101, 0, "a",
			"plan: 500 rounds x 202 prepared (case, route) pairs = 101000 visits, limit 100000 (give fewer --rounds or --max-rounds, cases or routes)"},
		{"cohort rounds over the limit", 5000, 5000, 1, 0, "a",
			"cohort t: rounds: want 1 to 1000, got 5000 (the capture's cohort default; give --rounds)"},
		{"rounds over the limit", 1001, 0, 1, 0, "a", "--rounds: want 1 to 1000 (or 0: the cohort's default), got 1001"},
		{"baseline not captured", 2, 0, 1, 0, "c", `--baseline "c": not one of the captured routes [a b]`},
		{"no baseline", 2, 0, 1, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Rounds, c.Baseline = tc.rounds, tc.baseline
			r := stagedReplayer(c, tc.cohortRounds, tc.cases, routes)
			for i := range tc.failed {
				r.entries[artifacts.Pair{Case: fmt.Sprintf("c%d", i), Route: "b"}].Status = artifacts.StatusFailed
			}
			if got := errText(r.checkConfig(routes)); got != tc.want {
				t.Errorf("checkConfig() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCheckConfigStackedOutputs: a visit stores each output with its sets
// stacked in one tensor file, so a case whose output times --sets exceeds
// what a file holds is refused before any timing: the methodology's 2^28
// add fits in 2 sets (a replay on the H200 failed after its first visits
// before this check) and not in 8.
func TestCheckConfigStackedOutputs(t *testing.T) {
	add := oracle.Case{ID: "add-16384x16384-cuda", Op: "add", Dims: map[string]int{"M": 16384, "N": 16384}, Dtype: "f32", Pattern: "normal", Policy: "strict"}
	sig, err := oracle.Signature(add)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sets, samples int
		want          string
	}{
		{2, 5, ""},
		{8, 5, "case add-16384x16384-cuda: output C of 268435456 elements in 8 buffer sets is more than a tensor file holds (2147483647 elements): give fewer --sets"},
		// One judged novel call a sample (a 1 GiB output: sets.CheckBytes
		// holds none): 7 fit, 8 are 2^31 elements.
		{2, 7, ""},
		{2, 8, "case add-16384x16384-cuda: output C of 268435456 elements in 8 judged novel calls is more than a tensor file holds (2147483647 elements): give fewer --samples"},
	} {
		cfg := DefaultConfig
		cfg.Threads, cfg.Baseline, cfg.Rounds, cfg.Sets, cfg.Samples = 2, "a", 2, tc.sets, tc.samples
		r := stagedReplayer(cfg, 0, 0, nil)
		r.cases = map[string]*artifacts.CapturedCase{add.ID: {Case: add, Signature: sig}}
		if got := errText(r.checkConfig([]string{"a"})); got != tc.want {
			t.Errorf("--sets %d --samples %d: checkConfig() = %q, want %q", tc.sets, tc.samples, got, tc.want)
		}
	}
}

// TestInputsFileRounds: an inputs file (internal/sets.DrawFile) holds
// seeds for every round a replay can run.
func TestInputsFileRounds(t *testing.T) {
	if sets.FileRounds != MaxRounds {
		t.Errorf("sets.FileRounds %d, replay.MaxRounds %d: a shard of --rounds %d would find too few seeds", sets.FileRounds, MaxRounds, MaxRounds)
	}
}
