package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tilepipe/tilepipe/capture"
	"github.com/tilepipe/tilepipe/internal/protocol"
	"github.com/urfave/cli/v2"
)

// builtinRoutes are the routes make build installs under bin/routes.
var builtinRoutes = []string{"halide", "orc", "openblas", "torch-eager", "torch-compile", "triton", "cublas", "halide-cuda", "kernel-c", "kernel-torch"}

func routesCommand() *cli.Command {
	return &cli.Command{
		Name:  "routes",
		Usage: "list each built-in route, whether it is available here, and why not",
		Flags: []cli.Flag{&cli.StringSliceFlag{Name: "kernel", Usage: "NAME=KIND:FILE: list your kernel file's route too, as capture --kernel would run it (repeatable)"}},
		Action: func(c *cli.Context) error {
			var rows []routeRow
			for _, name := range builtinRoutes {
				d, err := capture.Describe(c.Context, filepath.Join(capture.RoutesDir(), name, "route"))
				rows = append(rows, routeRow{name, d, err})
			}
			for _, k := range c.StringSlice("kernel") {
				name, d, err := capture.DescribeKernel(c.Context, capture.RoutesDir(), k)
				if name == "" {
					return err
				}
				rows = append(rows, routeRow{name, d, err})
			}
			return routesTable(c.App.Writer, rows)
		},
	}
}

// routeRow is one route as tilepipe routes lists it: its describe answer,
// or why it gave none.
type routeRow struct {
	name string
	d    protocol.Description
	err  error
}

// routesTable writes tilepipe routes' table.
func routesTable(w io.Writer, rows []routeRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUTE\tKIND\tAVAILABLE\tEXTRAS\tVERSION\tOPS / REASON")
	for _, r := range rows {
		switch d := r.d; {
		case r.err != nil:
			fmt.Fprintf(tw, "%s\t-\tno\t-\t-\t%v\n", r.name, r.err)
		case d.Available && len(d.Ops) == 0 && strings.HasPrefix(r.name, "kernel-"):
			kind := strings.TrimPrefix(r.name, "kernel-")
			fmt.Fprintf(tw, "%s\t%s\tyes\t%s\t%s\tthose its file names (--kernel NAME=%s:FILE, docs/kernels.md)\n", r.name, d.Kind, extras(d), d.Version, kind)
		case d.Available:
			fmt.Fprintf(tw, "%s\t%s\tyes\t%s\t%s\t%s\n", r.name, d.Kind, extras(d), d.Version, strings.Join(d.Ops, ","))
		default:
			fmt.Fprintf(tw, "%s\t%s\tno\t%s\t%s\t%s\n", r.name, d.Kind, extras(d), d.Version, d.Reason)
		}
	}
	return tw.Flush()
}

// extras names the optional protocol features a route describes itself
// with (docs/protocol.md): "validates" (capture checks its own first run)
// "ir" (it builds from --ir/--abi), "cuda" (it builds for the GPU) and
// "cache" (its builds share a --cache directory).
func extras(d protocol.Description) string {
	var e []string
	if d.Validates {
		e = append(e, "validates")
	}
	if d.AcceptsIR {
		e = append(e, "ir")
	}
	if slices.Contains(d.Devices, "cuda") {
		e = append(e, "cuda")
	}
	if d.BuildCache {
		e = append(e, "cache")
	}
	if len(e) == 0 {
		return "-"
	}
	return strings.Join(e, ",")
}
