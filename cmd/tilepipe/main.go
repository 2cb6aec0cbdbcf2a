// Command tilepipe turns a kernel-performance claim into a checkpoint a
// reviewer can verify: capture, prepare, replay, audit.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

// Exit codes (README): 0 all passed, 1 any failure, 2 usage, 3 completed
// with explicit unsupported or unavailable rows.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitUnsupported = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := tilepipe(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError marks errors in how tilepipe was called.
type usageError struct{ error }

// outcome is returned by commands that completed with rows that are not
// all passed; it is not printed as an error.
type outcome struct {
	code int
	msg  string
}

func (o *outcome) Error() string { return o.msg }

// tilepipe runs the CLI and maps errors to exit codes, in this one place.
func tilepipe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, args)
	var u usageError
	var o *outcome
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &o):
		if o.msg != "" {
			fmt.Fprintf(stderr, "tilepipe: %s\n", o.msg)
		}
		return o.code
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "tilepipe: error: %v\ntilepipe: hint: tilepipe help\n", u.error)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "tilepipe: error: %v\n", err)
		return exitFailure
	}
}

func newApp(stdout, stderr io.Writer) *cli.App {
	onUsage := func(_ *cli.Context, err error, _ bool) error { return usageError{err} }
	app := &cli.App{
		Name:      "tilepipe",
		Usage:     "turn a kernel-performance claim into a checkpoint a reviewer can verify",
		Writer:    stdout,
		ErrWriter: stderr,
		// A repeated flag is the way to give several values: a comma is
		// part of the value (--route-env KEY=a,b, a path with a comma).
		DisableSliceFlagSeparator: true,
		Commands: []*cli.Command{
			captureCommand(), prepareCommand(), replayCommand(), auditCommand(), runCommand(),
			compareCommand(), routesCommand(), cohortsCommand(),
		},
		OnUsageError:   onUsage,
		ExitErrHandler: func(*cli.Context, error) {},
		Action: func(c *cli.Context) error {
			if c.Args().Len() > 0 {
				return usageError{fmt.Errorf("unknown command %q", c.Args().First())}
			}
			cli.ShowAppHelp(c)
			return usageError{fmt.Errorf("no command given")}
		},
	}
	for _, c := range app.Commands {
		c.OnUsageError = onUsage
	}
	return app
}

// need returns a usage error when a required flag is empty.
func need(c *cli.Context, names ...string) error {
	for _, n := range names {
		if c.String(n) == "" {
			return usageError{fmt.Errorf("%s: --%s is required", c.Command.Name, n)}
		}
	}
	if c.Args().Len() > 0 {
		return usageError{fmt.Errorf("%s: unexpected arguments %v", c.Command.Name, c.Args().Slice())}
	}
	return nil
}
