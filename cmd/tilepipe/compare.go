package main

import (
	"encoding/json"
	"fmt"

	"github.com/tilepipe/tilepipe/replay"
	"github.com/tilepipe/tilepipe/report"
	"github.com/urfave/cli/v2"
)

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:  "compare",
		Usage: "recompute a finished replay's ratios against another baseline route, from its stored samples",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prepared", Usage: "prepared stage directory the replay was made from"},
			&cli.StringFlag{Name: "replay", Usage: "replay stage directory"},
			&cli.StringFlag{Name: "baseline", Usage: "route the paired ratios compare against"},
			&cli.BoolFlag{Name: "json", Usage: "print the summaries as JSON instead of a markdown table"},
		},
		Action: func(c *cli.Context) error {
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
