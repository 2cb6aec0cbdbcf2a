package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/load"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/internal/shard"
	"github.com/tilepipe/tilepipe/replay"
	"github.com/tilepipe/tilepipe/report"
	"github.com/urfave/cli/v2"
)

func replayFlags() []cli.Flag {
	d := replay.DefaultConfig
	return []cli.Flag{
		&cli.IntFlag{Name: "rounds", Value: d.Rounds, Usage: fmt.Sprintf("rounds, 1 to %d (0: the cohort's default, else the fewest, at least 6, that use every balanced route order equally); at most %d visits (rounds x prepared (case, route) pairs)", replay.MaxRounds, replay.MaxVisits)},
		&cli.IntFlag{Name: "samples", Value: d.Samples, Usage: fmt.Sprintf("batch samples per visit (1 to %d)", replay.MaxSamples)},
		&cli.IntFlag{Name: "singles", Value: d.Singles, Usage: fmt.Sprintf("single-call samples per visit (0 to %d)", replay.MaxSingles)},
		&cli.IntFlag{Name: "sets", Value: d.Sets, Usage: fmt.Sprintf("warm buffer sets the timed calls rotate over (%d to %d)", replay.MinSets, replay.MaxSets)},
		&cli.Float64Flag{Name: "sample-ms", Value: d.SampleMs, Usage: fmt.Sprintf("minimum duration of one batch sample (%g to %g)", replay.MinSampleMs, replay.MaxSampleMs)},
		&cli.Float64Flag{Name: "warmup-ms", Value: d.WarmupMs, Usage: fmt.Sprintf("warm-up before calibration (0 to %g)", replay.MaxWarmupMs)},
		&cli.Float64Flag{Name: "timeout-s", Value: d.TimeoutS, Usage: fmt.Sprintf("per-visit timeout, covering validation, warm-up, calibration, every sample and the final report (%g to %g)", replay.MinTimeoutS, replay.MaxTimeoutS)},
		&cli.StringFlag{Name: "baseline", Value: d.Baseline, Usage: "route the paired ratios compare against"},
		&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "bootstrap seed"},
		&cli.StringFlag{Name: "l2", Value: d.L2, Usage: "L2 policy of GPU visits: warm, or flush (twice the L2 written before every sample, outside its span; recorded)"},
		&cli.Float64Flag{Name: "target", Value: d.Target * 100, Usage: fmt.Sprintf("adaptive rounds: after --rounds, a case gets more rounds (a block of every balanced order at a time) until each paired ratio's exact interval (97.5%% at each look, docs/statistics.md) is within this many percent of its median, a row spent --budget-s or the replay --budget (0: exactly --rounds; default: the cohort's target, else %g; else %g to %g)", d.Target*100, replay.MinTargetPct, replay.MaxTargetPct)},
		&cli.Float64Flag{Name: "budget-s", Value: d.BudgetS, Usage: fmt.Sprintf("adaptive rounds: the visit time one (case, route) row may spend, in seconds (%g to %g)", replay.MinBudgetS, replay.MaxBudgetS)},
		&cli.DurationFlag{Name: "budget", Usage: fmt.Sprintf("adaptive rounds: the visit time the whole replay may spend, such as 5m or 1h30m, shared by the cases still open at each block (the fixed rounds always run; 0: no limit; else %gs to %gh)", replay.MinTotalBudgetS, replay.MaxTotalBudgetS/3600)},
		&cli.IntFlag{Name: "max-rounds", Usage: fmt.Sprintf("adaptive rounds: the most rounds a case gets (0: %d, or --rounds if more)", replay.DefaultMaxRounds)},
		&cli.BoolFlag{Name: "allow-load", Usage: fmt.Sprintf("keep rounds whose visits overlapped other load (more than %.2f cores of other processes) in the paired ratios; by default they are left out (recorded as config.load; the table counts them)", load.MaxOtherCores)},
		&cli.IntFlag{Name: "graph-batch", Value: d.GraphBatch, Usage: fmt.Sprintf("GPU visits also take graph samples: a CUDA graph of N calls replayed by adaptive_replay_span_v2 (0: none; 1 to %d)", replay.MaxGraphBatch)},
	}
}

// sandboxFlags are the flags of every stage that runs route code.
// stageFlags are the flags of every command that writes a stage: the
// sandbox of route code and the key that signs receipts.
func stageFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "no-sandbox", Usage: "run route code without a sandbox (recorded; the audit marks every row of such a replay)"},
		&cli.StringFlag{Name: "bwrap", Usage: "bubblewrap program that contains route code (default: bwrap on PATH)"},
		signFlag(),
	}
}

func replayConfig(c *cli.Context, prepared, output string) replay.Config {
	cfg := replay.DefaultConfig
	cfg.Prepared, cfg.Output, cfg.Key = prepared, output, signingKey(c)
	cfg.Rounds, cfg.Samples, cfg.Singles, cfg.Sets = c.Int("rounds"), c.Int("samples"), c.Int("singles"), c.Int("sets")
	cfg.SampleMs, cfg.WarmupMs, cfg.TimeoutS = c.Float64("sample-ms"), c.Float64("warmup-ms"), c.Float64("timeout-s")
	cfg.Baseline, cfg.Seed, cfg.L2, cfg.GraphBatch = c.String("baseline"), c.Uint64("seed"), c.String("l2"), c.Int("graph-batch")
	cfg.NoSandbox, cfg.Bwrap = c.Bool("no-sandbox"), c.String("bwrap")
	cfg.Target, cfg.BudgetS, cfg.MaxRounds = c.Float64("target")/100, c.Float64("budget-s"), c.Int("max-rounds")
	cfg.TotalBudgetS, cfg.CohortTarget = c.Duration("budget").Seconds(), !c.IsSet("target")
	cfg.DefaultBaseline = !c.IsSet("baseline")
	if c.Bool("allow-load") {
		cfg.Load = artifacts.LoadAllow
	}
	if c.IsSet("threads") {
		cfg.Threads = c.Int("threads")
	}
	cfg.Progress = progress.New(c.App.ErrWriter)
	return cfg
}

func replayCommand() *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "time exactly the prepared binaries in balanced orders and validate every output",
		Flags: append(append(replayFlags(), stageFlags()...),
			&cli.StringFlag{Name: "prepared", Usage: "prepared stage directory"},
			&cli.StringFlag{Name: "capture", Usage: "capture stage directory (default: from the prepared receipt)"},
			&cli.StringFlag{Name: "output", Usage: "NEW directory for the replay stage"},
			&cli.BoolFlag{Name: "resume", Usage: "continue an interrupted replay in --output"},
			&cli.IntFlag{Name: "threads", Value: replay.DefaultConfig.Threads, Usage: fmt.Sprintf("threads per timed process (1 to %d)", replay.MaxThreads)},
			&cli.StringFlag{Name: "shard", Usage: "I/N: time only shard I of N, the cases whose place in the capture is I modulo N, every visit of each (docs/scale.md); merge the shards with tilepipe merge"},
			&cli.StringFlag{Name: "inputs", Usage: "a shard's input seeds, the file every shard of the replay shares (tilepipe slurm writes it)"},
		),
		Action: func(c *cli.Context) error {
			if err := need(c, "prepared", "output"); err != nil {
				return err
			}
			cfg := replayConfig(c, c.String("prepared"), c.String("output"))
			cfg.Capture, cfg.Resume, cfg.Inputs = c.String("capture"), c.Bool("resume"), c.String("inputs")
			if c.IsSet("shard") {
				s, err := shard.Parse(c.String("shard"))
				if err != nil {
					return usageError{err}
				}
				cfg.Shard = s
			}
			res, err := replay.Run(c.Context, cfg)
			if err != nil {
				return whenInterrupted(c, err, resumeHint(c, cfg))
			}
			fmt.Fprint(c.App.Writer, report.Table(res.Doc))
			return replayOutcome(res)
		},
	}
}

func replayOutcome(res *replay.Result) error {
	counts := map[string]int{}
	for _, s := range res.Doc.Summary {
		counts[s.Status]++
	}
	if res.Failed > 0 {
		return &outcome{exitFailure, fmt.Sprintf("replay: %d failures (visits, closure checks or rows), kept in the results", res.Failed)}
	}
	if counts[artifacts.StatusUnsupported]+counts[artifacts.StatusUnavailable] > 0 {
		return &outcome{exitUnsupported, fmt.Sprintf("replay: %s (completed with unsupported rows)", totals(counts))}
	}
	return nil
}

// resumeHint says how to continue an interrupted replay: the whole
// command, with every flag this one set that the replay's plan records
// (a resume must ask for the same plan), ready to paste into a shell.
func resumeHint(c *cli.Context, cfg replay.Config) string {
	if _, err := os.Lstat(cfg.Output); err != nil && !cfg.Resume {
		return "it stopped before it wrote anything: run the same command again"
	}
	return "the visit in flight was not recorded; continue with: " + replayCommandLine(c, cfg, true)
}

// replayCommandLine is `tilepipe replay` of cfg's stages with the replay flags
// c set, and --resume when resume is set.
func replayCommandLine(c *cli.Context, cfg replay.Config, resume bool) string {
	args := []string{"tilepipe", "replay", "--prepared", cfg.Prepared, "--output", cfg.Output}
	var names []string
	for _, f := range append(replayFlags(), stageFlags()...) {
		names = append(names, f.Names()[0])
	}
	for _, n := range append(names, "capture", "threads", "shard", "inputs") {
		if !c.IsSet(n) {
			continue
		}
		switch v := c.Value(n).(type) {
		case bool:
			if v {
				args = append(args, "--"+n)
			}
		default:
			args = append(args, "--"+n, fmt.Sprint(v))
		}
	}
	if resume {
		args = append(args, "--resume")
	}
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// shellQuote is a as one word of a POSIX shell: as it is when it holds
// only characters no shell treats specially, else in single quotes.
func shellQuote(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
