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
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/tilepipe/tilepipe/capture"
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
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		// A second signal kills at once, as kill -9 would: nothing
		// committed is lost, and --resume continues a replay.
		signal.Stop(sigs)
		fmt.Fprintf(os.Stderr, "tilepipe: %s: stopping (a second one stops at once)\n", signalName(s))
		cancel(&interrupted{sig: s.(syscall.Signal)})
	}()
	stop := profile(os.Getenv("TILEPIPE_CPUPROFILE"))
	code := tilepipe(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// profile writes a CPU profile of the whole command to path (read it with
// go tool pprof) when path is set: TILEPIPE_CPUPROFILE, a developer's aid
// to find where a stage spends its time (docs/decisions.md).
func profile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tilepipe: TILEPIPE_CPUPROFILE: %v\n", err)
		os.Exit(2)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "tilepipe: TILEPIPE_CPUPROFILE: %v\n", err)
		}
	}
}

// interrupted is the cause of a context a signal cancelled. An
// interrupted command exits 128 + the signal's number (130 for SIGINT,
// 143 for SIGTERM) with what to do next, whatever error the stopped work
// returned: being stopped is not a result about the work.
type interrupted struct{ sig syscall.Signal }

func (i *interrupted) Error() string { return "interrupted by " + signalName(i.sig) }

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// next is what a command says to do after an interruption.
type next struct {
	error
	hint string
}

// whenInterrupted wraps a command's error with what to do next if the
// command was interrupted; other errors pass through.
func whenInterrupted(c *cli.Context, err error, hint string) error {
	if err != nil && c.Context.Err() != nil {
		return &next{err, hint}
	}
	return err
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
	var i *interrupted
	if err != nil && !errors.As(err, &o) && errors.As(context.Cause(ctx), &i) {
		hint := "nothing of the work in flight was recorded"
		var n *next
		if errors.As(err, &n) {
			hint = n.hint
		}
		fmt.Fprintf(stderr, "tilepipe: %v; %s\n", i, hint)
		return 128 + int(i.sig)
	}
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
			mergeCommand(), compareCommand(), exportCommand(), reportCommand(), pushCommand(), pullCommand(), slurmCommand(), routesCommand(), cohortsCommand(), keyCommand(),
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
		check := checks[c.Name]
		c.Before = func(ctx *cli.Context) error {
			if err := loadSigningKey(ctx); err != nil {
				return usageError{fmt.Errorf("%s: %w", ctx.Command.Name, err)}
			}
			if check == nil {
				return nil
			}
			if err := check(ctx); err != nil {
				return usageError{fmt.Errorf("%s: %w", ctx.Command.Name, err)}
			}
			return nil
		}
	}
	return app
}

// checks validate the stage configs a command's flags make (each stage's
// Config.Validate, docs/limits.md). They run before the command's Action,
// so a number out of its range is a usage error, found before anything is
// hashed or written.
var checks = map[string]func(*cli.Context) error{
	"capture": func(c *cli.Context) error { return captureConfig(c, "").Validate() },
	"prepare": func(c *cli.Context) error { return prepareConfig(c, "", "").Validate() },
	"replay":  func(c *cli.Context) error { return replayConfig(c, "", "").Validate() },
	"run": func(c *cli.Context) error {
		if err := captureConfig(c, "").Validate(); err != nil {
			return err
		}
		if err := prepareConfig(c, "", "").Validate(); err != nil {
			return err
		}
		return replayConfig(c, "", "").Validate()
	},
}

// buildTimeoutFlag is --build-timeout-s, in whole seconds, of capture,
// prepare and run.
func buildTimeoutFlag(d time.Duration, what string) cli.Flag {
	return &cli.IntFlag{Name: "build-timeout-s", Value: int(d / time.Second),
		Usage: fmt.Sprintf("seconds %s may take (%g to %g)", what, capture.MinBuildTimeout.Seconds(), capture.MaxBuildTimeout.Seconds())}
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
