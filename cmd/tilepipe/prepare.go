package main

import (
	"fmt"
	"time"

	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/prepare"
	"github.com/urfave/cli/v2"
)

func prepareCommand() *cli.Command {
	return &cli.Command{
		Name:  "prepare",
		Usage: "verify a capture and turn its binaries into timing harnesses",
		Flags: append(stageFlags(),
			&cli.StringFlag{Name: "capture", Usage: "capture stage directory"},
			&cli.StringFlag{Name: "output", Usage: "NEW directory for the prepared stage"},
			buildTimeoutFlag(prepare.DefaultConfig.BuildTimeout, "every command: the harness compile, each link, each closure listing"),
		),
		Action: func(c *cli.Context) error {
			if err := need(c, "capture", "output"); err != nil {
				return err
			}
			cfg := prepareConfig(c, c.String("capture"), c.String("output"))
			res, err := prepare.Run(c.Context, cfg)
			if err != nil {
				return whenInterrupted(c, err, "prepare stopped and removed its incomplete directory: run the same command again")
			}
			fmt.Fprintf(c.App.Writer, "prepared %s: %s\n", cfg.Output, res.Manifest)
			return countsOutcome("prepare", res.Counts)
		},
	}
}

// prepareConfig is what prepare's flags (and run's) ask for.
func prepareConfig(c *cli.Context, capture, output string) prepare.Config {
	cfg := prepare.DefaultConfig
	cfg.Capture, cfg.Output, cfg.Progress, cfg.Key = capture, output, progress.New(c.App.ErrWriter), signingKey(c)
	cfg.NoSandbox, cfg.Bwrap = c.Bool("no-sandbox"), c.String("bwrap")
	cfg.BuildTimeout = time.Duration(c.Int("build-timeout-s")) * time.Second
	return cfg
}
