package main

import (
	"encoding/json"
	"fmt"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/compare"
	"github.com/tilepipe/tilepipe/replay"
	"github.com/tilepipe/tilepipe/report"
	"github.com/urfave/cli/v2"
)

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:  "compare",
		Usage: "recompute a finished replay's ratios against another baseline route, from its stored samples; or set two checkpoints side by side (--old, --new)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "old", Usage: "a run directory: the checkpoint compared against (with --new)"},
			&cli.StringFlag{Name: "new", Usage: "a run directory: rows are matched to --old's by case digest and route"},
			&cli.StringFlag{Name: "prepared", Usage: "prepared stage directory the replay was made from"},
			&cli.StringFlag{Name: "replay", Usage: "replay stage directory"},
			&cli.StringFlag{Name: "baseline", Usage: "route the paired ratios compare against"},
			&cli.BoolFlag{Name: "json", Usage: "print the summaries as JSON instead of a markdown table"},
		},
		Action: func(c *cli.Context) error {
			if c.String("old") != "" || c.String("new") != "" {
				return compareCheckpoints(c)
			}
			if err := need(c, "prepared", "replay", "baseline"); err != nil {
				return err
			}
			doc, err := replay.Compare(c.String("prepared"), c.String("replay"), c.String("baseline"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				b, err := json.MarshalIndent(map[string]any{"baseline": doc.Config.Baseline, "summary": doc.Summary}, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "%s\n", b)
				return nil
			}
			fmt.Fprint(c.App.Writer, report.Table(doc))
			return nil
		},
	}
}

// compareCheckpoints is compare --old DIR --new DIR.
func compareCheckpoints(c *cli.Context) error {
	if err := need(c, "old", "new"); err != nil {
		return err
	}
	for _, f := range []string{"prepared", "replay", "baseline"} {
		if c.String(f) != "" {
			return usageError{fmt.Errorf("compare: --%s belongs to a replay's comparison against another baseline, not to --old/--new", f)}
		}
	}
	r, err := compare.Run(c.String("old"), c.String("new"))
	if err != nil {
		return err
	}
	if c.Bool("json") {
		b, err := artifacts.MarshalJSON(r)
		if err != nil {
			return err
		}
		c.App.Writer.Write(b)
		return nil
	}
	fmt.Fprint(c.App.Writer, compare.Markdown(r))
	return nil
}
