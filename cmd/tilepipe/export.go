package main

import (
	"fmt"
	"path/filepath"

	"github.com/tilepipe/tilepipe/export"
	"github.com/urfave/cli/v2"
)

func exportCommand() *cli.Command {
	return &cli.Command{
		Name:  "export",
		Usage: "write a replay's samples and summaries as Parquet and CSV into a NEW directory (docs/format.md, \"Exports\")",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "checkpoint", Usage: "a run directory: its replay stage is exported"},
			&cli.StringFlag{Name: "replay", Usage: "the replay stage directory (instead of --checkpoint)"},
			&cli.StringFlag{Name: "output", Usage: "NEW directory for " + fmt.Sprint(export.Files)},
		},
		Action: func(c *cli.Context) error {
			if err := need(c, "output"); err != nil {
				return err
			}
			rep, err := replayOf(c)
			if err != nil {
				return err
			}
			if err := export.Run(c.Context, rep, c.String("output")); err != nil {
				return err
			}
			for _, f := range export.Files {
				fmt.Fprintln(c.App.Writer, filepath.Join(c.String("output"), f))
			}
			return nil
		},
	}
}

// replayOf is the replay stage --checkpoint DIR (DIR/replay) or --replay
// names; exactly one of them.
func replayOf(c *cli.Context) (string, error) {
	switch cp, rep := c.String("checkpoint"), c.String("replay"); {
	case cp != "" && rep != "":
		return "", usageError{fmt.Errorf("%s: --checkpoint and --replay: give one", c.Command.Name)}
	case cp != "":
		return filepath.Join(cp, "replay"), nil
	case rep != "":
		return rep, nil
	}
	return "", usageError{fmt.Errorf("%s: --checkpoint or --replay is required", c.Command.Name)}
}
