package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/report/html"
	"github.com/urfave/cli/v2"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "write a checkpoint as one self-contained HTML page: results, sample plots, paired ratios, visit timeline, failed visits, audit verdict",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "checkpoint", Usage: "a run directory (its replay stage, and its audit stage where there is one)"},
			&cli.StringFlag{Name: "output", Usage: "NEW HTML file"},
		},
		Action: func(c *cli.Context) error {
			if err := need(c, "checkpoint", "output"); err != nil {
				return err
			}
			if err := writeReport(c.String("checkpoint"), c.String("output")); err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, c.String("output"))
			return nil
		},
	}
}

// writeReport renders the checkpoint in dir to output, a new file.
func writeReport(dir, output string) error {
	if _, err := os.Lstat(output); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("report %s already exists; choose a new path", output)
	}
	pg, err := html.Load(dir)
	if err != nil {
		return err
	}
	b, err := html.Render(pg)
	if err != nil {
		return err
	}
	return artifacts.WriteFileAtomic(output, b)
}
