package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/audit"
	"github.com/tilepipe/tilepipe/internal/progress"
	"github.com/urfave/cli/v2"
)

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "re-verify a capture, prepared and replay chain independently",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "capture", Usage: "capture stage directory"},
			&cli.StringFlag{Name: "prepared", Usage: "prepared stage directory"},
			&cli.StringFlag{Name: "replay", Usage: "replay stage directory"},
			&cli.StringFlag{Name: "output", Usage: "NEW audit.json (an in-toto Statement); audit.md is written beside it"},
			&cli.StringFlag{Name: "stage", Usage: "NEW directory for the audit as a stage (an OCI layout whose subject is the replay manifest, its config the statement, signed with --sign), as run writes NEW/audit"},
			&cli.StringFlag{Name: "expect", Usage: "the replay manifest digest (sha256:..., what replay printed) received out of band; the audit is pinned to it"},
			&cli.StringSliceFlag{Name: "trust", Usage: "a public key (KEY.pub of tilepipe key generate) every receipt must be signed by one of; repeat for several"},
			signFlag(),
		},
		Action: func(c *cli.Context) error {
			if err := need(c, "capture", "prepared", "replay"); err != nil {
				return err
			}
			if e := c.String("expect"); e != "" {
				if _, err := artifacts.ParseDigest(e); err != nil {
					return usageError{fmt.Errorf("audit: --expect %q: want the replay manifest digest, sha256:<64 hex>", e)}
				}
			}
			trust, err := trustedKeys(c)
			if err != nil {
				return err
			}
			return runAudit(c, audit.Config{Capture: c.String("capture"), Prepared: c.String("prepared"), Replay: c.String("replay"), Expect: c.String("expect"), Trust: trust}, c.String("output"), c.String("stage"))
		},
	}
}

func runAudit(c *cli.Context, cfg audit.Config, output, stage string) error {
	cfg.Progress = progress.New(c.App.ErrWriter)
	if stage != "" {
		if _, err := os.Lstat(stage); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("audit stage %s already exists; choose a new path", stage)
		}
	}
	rep, err := audit.Run(c.Context, cfg)
	if err != nil {
		return err
	}
	if stage != "" {
		d, err := audit.WriteStage(stage, rep, signingKey(c))
		if err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "tilepipe: audit stage %s: %s\n", stage, d.Digest)
	}
	md := audit.Markdown(rep)
	if output != "" {
		js, err := audit.MarshalStatement(rep)
		if err != nil {
			return err
		}
		mdPath := strings.TrimSuffix(output, ".json") + ".md"
		for _, p := range []string{output, mdPath} {
			if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("audit output %s already exists; choose a new path", p)
			}
		}
		if err := artifacts.WriteFileAtomic(output, js); err != nil {
			return err
		}
		if err := artifacts.WriteFileAtomic(mdPath, []byte(md)); err != nil {
			return err
		}
	}
	fmt.Fprint(c.App.Writer, md)
	claims := fmt.Sprintf("%d of %d claims supported", rep.Claims.Supported, rep.Claims.Supported+rep.Claims.Unsupported)
	if rep.Verdict != "pass" {
		return &outcome{exitFailure, "audit: FAIL: checkpoint broken; " + claims + "; " + rep.Pin() + "; " + rep.Signed}
	}
	fmt.Fprintf(c.App.Writer, "\naudit verdict: PASS (checkpoint intact; %s; %s; %s)\n", claims, rep.Pin(), rep.Signed)
	return nil
}
