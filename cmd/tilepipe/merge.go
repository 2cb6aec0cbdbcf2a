package main

import (
	"fmt"

	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/replay"
	"github.com/tilepipe/tilepipe/report"
	"github.com/urfave/cli/v2"
)

func mergeCommand() *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "merge the shards of a replay (replay --shard I/N) into one replay stage, recomputed from their raw samples",
		ArgsUsage: "SHARD_DIR...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "prepared", Usage: "the prepared stage every shard replays"},
			&cli.StringFlag{Name: "capture", Usage: "capture stage directory (default: from the prepared receipt)"},
			&cli.StringFlag{Name: "output", Usage: "NEW directory for the merged replay stage"},
			&cli.BoolFlag{Name: "allow-mixed", Usage: "merge shards whose machines differ (CPU model or flags, cores, clock, GPU, driver); recorded, and every row marked with its machine"},
			signFlag(),
		},
		Action: func(c *cli.Context) error {
			for _, n := range []string{"prepared", "output"} {
				if c.String(n) == "" {
					return usageError{fmt.Errorf("merge: --%s is required", n)}
				}
			}
			if c.Args().Len() == 0 {
				return usageError{fmt.Errorf("merge: name every shard's replay directory")}
			}
			res, err := replay.Merge(c.Context, replay.MergeConfig{Prepared: c.String("prepared"), Capture: c.String("capture"), Output: c.String("output"),
				Shards: c.Args().Slice(), AllowMixed: c.Bool("allow-mixed"), Key: signingKey(c), Progress: progress.New(c.App.ErrWriter)})
			if err != nil {
				return err
			}
			fmt.Fprint(c.App.Writer, report.Table(res.Doc))
			fmt.Fprintf(c.App.ErrWriter, "merge: %d shards into %s, manifest %s\n", len(res.Doc.Merge.Shards), c.String("output"), res.Manifest)
			return replayOutcome(res)
		},
	}
}
