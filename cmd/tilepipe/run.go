package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tilepipe/tilepipe/audit"
	"github.com/tilepipe/tilepipe/capture"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/prepare"
	"github.com/tilepipe/tilepipe/replay"
	"github.com/urfave/cli/v2"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "capture, prepare, replay and audit into NEW/{capture,prepared,replay,audit.json}",
		Flags: append(append(append(captureFlags(), replayFlags()...), sandboxFlags()...),
			&cli.StringFlag{Name: "output", Usage: "NEW directory for all four stages"}),
		Action: func(c *cli.Context) error {
			if err := need(c, "output"); err != nil {
				return err
			}
			out := c.String("output")
			if err := os.Mkdir(out, 0o755); err != nil {
				return fmt.Errorf("output directory %s: %w (stages never overwrite; choose a new one)", out, err)
			}
			w := c.App.Writer
			p := progress.New(c.App.ErrWriter)
			capDir, prepDir, repDir := filepath.Join(out, "capture"), filepath.Join(out, "prepared"), filepath.Join(out, "replay")
			cres, err := capture.Run(c.Context, captureConfig(c, capDir))
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "capture  %s: %v\n", cres.Manifest, cres.Counts)
			pcfg := prepare.DefaultConfig
			pcfg.Capture, pcfg.Output, pcfg.Progress = capDir, prepDir, p
			pcfg.NoSandbox, pcfg.Bwrap = c.Bool("no-sandbox"), c.String("bwrap")
			pres, err := prepare.Run(c.Context, pcfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "prepared %s: %v\n", pres.Manifest, pres.Counts)
			rcfg := replayConfig(c, prepDir, repDir)
			rres, err := replay.Run(c.Context, rcfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "replay   %s\n\n", rres.Manifest)
			fmt.Fprint(w, replay.Table(rres.Doc))
			fmt.Fprintln(w)
			auditErr := runAudit(c, audit.Config{Capture: capDir, Prepared: prepDir, Replay: repDir}, filepath.Join(out, "audit.json"))
			// The worst outcome wins: a failure anywhere, then unsupported rows.
			var o *outcome
			if auditErr != nil && !errors.As(auditErr, &o) {
				return auditErr
			}
			for _, e := range []error{auditErr, replayOutcome(rres), countsOutcome("prepare", pres.Counts), countsOutcome("capture", cres.Counts)} {
				if errors.As(e, &o) && o.code == exitFailure {
					return o
				}
			}
			for _, e := range []error{replayOutcome(rres), countsOutcome("capture", cres.Counts)} {
				if errors.As(e, &o) {
					return o
				}
			}
			return nil
		},
	}
}
