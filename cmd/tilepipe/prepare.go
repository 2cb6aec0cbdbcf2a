package main

import (
	"fmt"

	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/prepare"
	"github.com/urfave/cli/v2"
)

func prepareCommand() *cli.Command {
	return &cli.Command{
		Name:  "prepare",
		Usage: "verify a capture and turn its binaries into timing harnesses",
		Flags: append(sandboxFlags(),
			&cli.StringFlag{Name: "capture", Usage: "capture stage directory"},
			&cli.StringFlag{Name: "output", Usage: "NEW directory for the prepared stage"},
		),
		Action: func(c *cli.Context) error {
			if err := need(c, "capture", "output"); err != nil {
				return err
			}
			cfg := prepare.DefaultConfig
			cfg.Capture, cfg.Output, cfg.Progress = c.String("capture"), c.String("output"), progress.New(c.App.ErrWriter)
			cfg.NoSandbox, cfg.Bwrap = c.Bool("no-sandbox"), c.String("bwrap")
			res, err := prepare.Run(c.Context, cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "prepared %s: %s\n", cfg.Output, res.Manifest)
			return countsOutcome("prepare", res.Counts)
		},
	}
}
