package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/capture"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/urfave/cli/v2"
)

func captureFlags() []cli.Flag {
	d := capture.DefaultConfig
	return []cli.Flag{
		&cli.StringFlag{Name: "cohort", Value: d.Cohort, Usage: "built-in cohort name or cohort JSON file"},
		&cli.StringFlag{Name: "routes", Value: strings.Join(d.Routes, ","), Usage: "comma-separated built-in routes; ALIAS=ROUTE runs ROUTE under another name (halide,halide-new=halide: two builds of one route in one replay)"},
		&cli.StringSliceFlag{Name: "kernel", Usage: "NAME=KIND:FILE: your kernel file as a route named NAME (repeatable); KIND c: a C file with a '// tilepipe-ops: OP...' line defining int tilepipe_kernel(void *const *args) (docs/kernels.md)"},
		&cli.StringSliceFlag{Name: "route-exec", Usage: "PATH of a route program speaking docs/protocol.md (repeatable); NAME=PATH runs it under NAME (two versions of one route side by side)"},
		&cli.IntFlag{Name: "threads", Value: d.Threads, Usage: fmt.Sprintf("threads per timed process (also recorded at capture; 1 to %d)", capture.MaxThreads)},
		&cli.IntFlag{Name: "jobs", Value: d.Jobs, Usage: fmt.Sprintf("route builds run at once (1 to %d)", capture.MaxJobs)},
		buildTimeoutFlag(d.BuildTimeout, "every route program call (describe, each build)"),
		&cli.StringSliceFlag{Name: "ir", Usage: "FILE of external IR for routes that accept IR (repeatable; needs --abi)"},
		&cli.StringFlag{Name: "abi", Usage: "FILE: the external IR's entry ABI as JSON (docs/protocol.md; needs --ir)"},
		&cli.StringSliceFlag{Name: "route-env", Usage: "KEY=VALUE a route program sees in describe and build (repeatable; recorded); it sees nothing else of the environment but PATH, HOME and the locale"},
	}
}

func captureConfig(c *cli.Context, output string) capture.Config {
	cfg := capture.DefaultConfig
	cfg.Cohort, cfg.Output, cfg.Threads, cfg.Jobs = c.String("cohort"), output, c.Int("threads"), c.Int("jobs")
	cfg.Key = signingKey(c)
	cfg.BuildTimeout = time.Duration(c.Int("build-timeout-s")) * time.Second
	cfg.Routes = nil
	for _, r := range strings.Split(c.String("routes"), ",") {
		if r = strings.TrimSpace(r); r != "" {
			cfg.Routes = append(cfg.Routes, r)
		}
	}
	cfg.RouteExec, cfg.Kernels = c.StringSlice("route-exec"), c.StringSlice("kernel")
	cfg.IR, cfg.ABI = c.StringSlice("ir"), c.String("abi")
	cfg.RouteEnv = c.StringSlice("route-env")
	cfg.NoSandbox, cfg.Bwrap = c.Bool("no-sandbox"), c.String("bwrap")
	cfg.Progress = progress.New(c.App.ErrWriter)
	return cfg
}

func captureCommand() *cli.Command {
	return &cli.Command{
		Name:  "capture",
		Usage: "build every case of a cohort with each route; store sources, binaries and tensors by digest",
		Flags: append(append(captureFlags(), stageFlags()...), &cli.StringFlag{Name: "output", Usage: "NEW directory for the capture stage"}),
		Action: func(c *cli.Context) error {
			if err := need(c, "output"); err != nil {
				return err
			}
			res, err := capture.Run(c.Context, captureConfig(c, c.String("output")))
			if err != nil {
				return whenInterrupted(c, err, "capture stopped and removed its incomplete directory: run the same command again")
			}
			fmt.Fprintf(c.App.Writer, "capture %s: %s\n", c.String("output"), res.Manifest)
			return countsOutcome("capture", res.Counts)
		},
	}
}

// countsOutcome maps row counts to an exit: any failure 1, else any
// unsupported/unavailable 3, else 0.
func countsOutcome(stage string, counts map[string]int) error {
	msg := fmt.Sprintf("%s: %s", stage, totals(counts))
	switch {
	case counts[artifacts.StatusFailed] > 0:
		return &outcome{exitFailure, msg + " (failures are kept as rows)"}
	case counts[artifacts.StatusUnsupported]+counts[artifacts.StatusUnavailable] > 0:
		return &outcome{exitUnsupported, msg + " (completed with unsupported rows)"}
	}
	return nil
}
