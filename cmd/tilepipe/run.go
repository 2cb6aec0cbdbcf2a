package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/audit"
	"github.com/tilepipe/tilepipe/capture"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/tilepipe/tilepipe/prepare"
	"github.com/tilepipe/tilepipe/replay"
	"github.com/tilepipe/tilepipe/report"
	"github.com/urfave/cli/v2"
)

// The run directory: the stages' directories and, at its top, what a
// reader opens first.
const (
	runCapture  = "capture"
	runPrepared = "prepared"
	runReplay   = "replay"
	runResults  = "results.md" // replay.Table of the replay stage
	runAuditMD  = "audit.md"
	runAuditDoc = "audit.json"
	// runAuditStage is the audit as a stage (audit.WriteStage).
	runAuditStage = "audit"
	runReport     = "report.html"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:  "run",
		Usage: "capture, prepare, replay and audit into NEW/{capture,prepared,replay}, with results.md, audit.md and audit.json beside them",
		Flags: append(append(append(captureFlags(), replayFlags()...), stageFlags()...),
			&cli.StringFlag{Name: "output", Usage: "NEW directory for all four stages (missing parents are made: runs/mine works in a fresh clone)"}),
		Action: func(c *cli.Context) error {
			if err := need(c, "output"); err != nil {
				return err
			}
			out := c.String("output")
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return fmt.Errorf("output directory %s: %w", out, err)
			}
			if err := os.Mkdir(out, 0o755); err != nil {
				return fmt.Errorf("output directory %s: %w (stages never overwrite; choose a new one)", out, err)
			}
			err := runAll(c, out)
			fmt.Fprintf(c.App.Writer, "\n%s\n", runWhere(out))
			return err
		},
	}
}

func runAll(c *cli.Context, out string) error {
	w := c.App.Writer
	p := progress.New(c.App.ErrWriter)
	capDir, prepDir, repDir := filepath.Join(out, runCapture), filepath.Join(out, runPrepared), filepath.Join(out, runReplay)
	cres, err := capture.Run(c.Context, captureConfig(c, capDir))
	if err != nil {
		// Capture removed its own directory: leave no empty run behind.
		os.Remove(out)
		return whenInterrupted(c, err, "capture stopped; nothing was committed and the run directory was removed: run the same command again")
	}
	fmt.Fprintf(w, "capture  %s: %s\n", cres.Manifest, totals(cres.Counts))
	pcfg := prepareConfig(c, capDir, prepDir)
	pcfg.Progress = p
	pres, err := prepare.Run(c.Context, pcfg)
	if err != nil {
		return whenInterrupted(c, err, fmt.Sprintf("prepare stopped and removed its incomplete directory; the capture is committed: continue with tilepipe prepare --capture %s --output %s, then replay and audit", capDir, prepDir))
	}
	fmt.Fprintf(w, "prepared %s: %s\n", pres.Manifest, totals(pres.Counts))
	rcfg := replayConfig(c, prepDir, repDir)
	rres, err := replay.Run(c.Context, rcfg)
	if err != nil {
		hint := resumeHint(c, rcfg)
		if _, serr := os.Lstat(repDir); serr != nil {
			hint = "capture and prepare are committed: continue with " + replayCommandLine(c, rcfg, false)
		}
		return whenInterrupted(c, err, hint+fmt.Sprintf(", then tilepipe audit --capture %s --prepared %s --replay %s --output %s", capDir, prepDir, repDir, filepath.Join(out, runAuditDoc)))
	}
	fmt.Fprintf(w, "replay   %s\n\n", rres.Manifest)
	table := report.Table(rres.Doc)
	fmt.Fprint(w, table)
	fmt.Fprintln(w)
	// runAudit writes audit.json and audit.md beside it.
	auditErr := runAudit(c, audit.Config{Capture: capDir, Prepared: prepDir, Replay: repDir}, filepath.Join(out, runAuditDoc), filepath.Join(out, runAuditStage))
	var o *outcome
	if err := artifacts.WriteFileAtomic(filepath.Join(out, runResults), []byte(table)); err != nil {
		err = fmt.Errorf("results table: %w", err)
		if auditErr != nil && !errors.As(auditErr, &o) {
			return errors.Join(auditErr, err)
		}
		return err
	}
	// The worst outcome wins: a failure anywhere, then unsupported rows.
	if auditErr != nil && !errors.As(auditErr, &o) {
		return auditErr
	}
	if err := writeReport(out, filepath.Join(out, runReport)); err != nil {
		return fmt.Errorf("report: %w", err)
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
}

// runWhere says where a run's results are, naming only what exists, so a
// run that stopped early points at the stages it left.
func runWhere(out string) string {
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(out, name))
		return err == nil
	}
	var parts []string
	if exists(runResults) {
		parts = append(parts, "results: "+filepath.Join(out, runResults))
	}
	if exists(runReport) {
		parts = append(parts, "report: "+filepath.Join(out, runReport))
	}
	if exists(runAuditDoc) && exists(runAuditMD) {
		parts = append(parts, fmt.Sprintf("audit: %s (%s)", filepath.Join(out, runAuditMD), filepath.Join(out, runAuditDoc)))
	}
	var stages []string
	for _, s := range []string{runCapture, runPrepared, runReplay, runAuditStage} {
		if exists(s) {
			stages = append(stages, filepath.Join(out, s))
		}
	}
	where := strings.Join(parts, ", ")
	if where != "" {
		where += "; "
	}
	if len(stages) == 0 {
		return where + "stages: none"
	}
	return where + "stages: " + strings.Join(stages, ", ")
}
