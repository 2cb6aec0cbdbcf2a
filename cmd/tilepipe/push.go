package main

import (
	"fmt"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/transfer"
	"github.com/urfave/cli/v2"
)

// args2 returns a command's two positional arguments, or a usage error.
func args2(c *cli.Context, a, b string) (string, string, error) {
	if c.Args().Len() != 2 {
		return "", "", usageError{fmt.Errorf("%s: want %s %s, got %d arguments", c.Command.Name, a, b, c.Args().Len())}
	}
	return c.Args().Get(0), c.Args().Get(1), nil
}

func pushCommand() *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "verify a checkpoint (capture, prepared, replay, audit) and push it to an OCI registry, each stage tagged by its name",
		ArgsUsage: "CHECKPOINT_DIR REGISTRY/REPOSITORY",
		Action: func(c *cli.Context) error {
			dir, ref, err := args2(c, "CHECKPOINT_DIR", "REGISTRY/REPOSITORY")
			if err != nil {
				return err
			}
			ds, err := transfer.Push(c.Context, dir, ref, progress.New(c.App.ErrWriter))
			if err != nil {
				return err
			}
			for i, d := range ds {
				fmt.Fprintf(c.App.Writer, "%s:%s %s\n", ref, transferTag(i), d.Digest)
			}
			return nil
		},
	}
}

func pullCommand() *cli.Command {
	return &cli.Command{
		Name:      "pull",
		Usage:     "pull a checkpoint from an OCI registry into a NEW directory, every blob and the chain verified before it appears",
		ArgsUsage: "REGISTRY/REPOSITORY NEW_DIR",
		Action: func(c *cli.Context) error {
			ref, dir, err := args2(c, "REGISTRY/REPOSITORY", "NEW_DIR")
			if err != nil {
				return err
			}
			ds, err := transfer.Pull(c.Context, ref, dir, progress.New(c.App.ErrWriter))
			if err != nil {
				return err
			}
			for i, d := range ds {
				fmt.Fprintf(c.App.Writer, "%s/%s %s\n", dir, transferTag(i), d.Digest)
			}
			return nil
		},
	}
}

// transferTag is the tag (and directory) of the i-th stage of a chain.
func transferTag(i int) string { return artifacts.StageName(transfer.Chain[i]) }
