package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/tilepipe/tilepipe/internal/slurm"
	"github.com/urfave/cli/v2"
)

func slurmCommand() *cli.Command {
	forwarded := append(append(replayFlags(), stageFlags()...),
		&cli.IntFlag{Name: "threads", Usage: "threads per timed process; give it, so that every shard's config is the same whatever its node's cores"})
	return &cli.Command{
		Name:        "slurm",
		Usage:       "run a replay as a Slurm job array of shards, merged and audited by a job after them (docs/scale.md)",
		Subcommands: []*cli.Command{slurmSubmitCommand(forwarded), slurmStatusCommand(), slurmResubmitCommand()},
	}
}

func slurmSubmitCommand(forwarded []cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "submit",
		Usage: "write a job directory (scripts, input seeds) and submit one array task per shard, then the merge and audit",
		Flags: append(forwarded,
			&cli.StringFlag{Name: "prepared", Usage: "prepared stage, on a filesystem every node reads"},
			&cli.StringFlag{Name: "capture", Usage: "its capture (default: from the prepared receipt)"},
			&cli.IntFlag{Name: "shards", Usage: "shards, one array task each (at most the cases)"},
			&cli.StringFlag{Name: "output", Usage: "NEW job directory, on the shared filesystem: shards/I, merged, audit.json, logs"},
			&cli.StringFlag{Name: "partition", Usage: "sbatch --partition"},
			&cli.StringFlag{Name: "gres", Usage: "sbatch --gres of every shard task (gpu:1: one GPU each)"},
			&cli.StringFlag{Name: "time", Usage: "sbatch --time of every task"},
			&cli.StringFlag{Name: "account", Usage: "sbatch --account"},
			&cli.IntFlag{Name: "cpus-per-task", Usage: "cores per shard task; 0 (default): a whole node each (--exclusive), so no shard times beside another"},
			&cli.StringFlag{Name: "tilepipe", Usage: "the tilepipe program every task runs, on the shared filesystem (default: this one)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "write the job directory and print the sbatch commands; submit nothing"},
		),
		Action: func(c *cli.Context) error { return runSlurmSubmit(c, forwarded) },
	}
}

// runSlurmSubmit gathers submit's flags (the replay flags given, to
// forward to every shard) and writes, or also submits, the job.
func runSlurmSubmit(c *cli.Context, forwarded []cli.Flag) error {
	if err := need(c, "prepared", "output"); err != nil {
		return err
	}
	if c.Int("shards") < 1 {
		return usageError{fmt.Errorf("slurm submit: --shards: want at least 1, got %d", c.Int("shards"))}
	}
	exe := c.String("tilepipe")
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return err
		}
	}
	var args []string
	for _, f := range forwarded {
		name := f.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		if b, ok := c.Value(name).(bool); ok {
			if b {
				args = append(args, "--"+name)
			}
			continue
		}
		args = append(args, "--"+name, fmt.Sprint(c.Value(name)))
	}
	cfg := slurm.Config{Prepared: c.String("prepared"), Capture: c.String("capture"), Output: c.String("output"), Shards: c.Int("shards"), Tilepipe: exe, ReplayArgs: args,
		Options: slurm.Options{Partition: c.String("partition"), Gres: c.String("gres"), Time: c.String("time"), Account: c.String("account"), CPUsPerTask: c.Int("cpus-per-task")}}
	if c.Bool("dry-run") {
		j, err := slurm.Plan(cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.Writer, "sbatch --parsable --array=0-%d %s/%s\nsbatch --parsable --dependency=afterok:ARRAY_ID --kill-on-invalid-dep=yes %s/%s\n", j.Shards-1, j.Dir, slurm.ShardScript, j.Dir, slurm.MergeScript)
		return nil
	}
	j, err := slurm.Submit(c.Context, cfg)
	if err != nil {
		return err
	}
	s := j.Submissions[len(j.Submissions)-1]
	fmt.Fprintf(c.App.Writer, "shards: job %s (array 0-%d); merge and audit: job %s (afterok)\n", s.Array, j.Shards-1, s.Merge)
	fmt.Fprintf(c.App.ErrWriter, "slurm: %s; follow it with tilepipe slurm status %s\n", j.Dir, j.Dir)
	return nil
}

func slurmStatusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "each shard's Slurm state and its stage on disk, the merge's and the audit's",
		ArgsUsage: "DIR",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print JSON"}},
		Action: func(c *cli.Context) error {
			j, err := jobArg(c)
			if err != nil {
				return err
			}
			st, err := j.Status(c.Context)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				b, err := json.MarshalIndent(st, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "%s\n", b)
			} else {
				fmt.Fprint(c.App.Writer, st.Table())
			}
			return nil
		},
	}
}

func slurmResubmitCommand() *cli.Command {
	return &cli.Command{
		Name:      "resubmit",
		Usage:     "submit again only the shards that are not committed (a begun one resumes), then the merge and audit",
		ArgsUsage: "DIR",
		Action: func(c *cli.Context) error {
			if _, err := jobArg(c); err != nil {
				return err
			}
			j, todo, err := slurm.Resubmit(c.Context, c.Args().First())
			if err != nil {
				return err
			}
			s := j.Submissions[len(j.Submissions)-1]
			if len(todo) == 0 {
				fmt.Fprintf(c.App.Writer, "every shard is committed; merge and audit: job %s\n", s.Merge)
				return nil
			}
			var ids []string
			for _, i := range todo {
				ids = append(ids, fmt.Sprint(i))
			}
			fmt.Fprintf(c.App.Writer, "shards %s: job %s; merge and audit: job %s (afterok)\n", strings.Join(ids, ","), s.Array, s.Merge)
			return nil
		},
	}
}

func jobArg(c *cli.Context) (*slurm.Job, error) {
	if c.Args().Len() != 1 {
		return nil, usageError{fmt.Errorf("slurm %s: want the job directory, got %d arguments", c.Command.Name, c.Args().Len())}
	}
	return slurm.Load(c.Args().First())
}
