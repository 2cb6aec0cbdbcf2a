package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tilepipe/tilepipe/cohort"
	"github.com/urfave/cli/v2"
)

func cohortsCommand() *cli.Command {
	return &cli.Command{
		Name:  "cohorts",
		Usage: "list the built-in cohorts and their cases",
		Action: func(c *cli.Context) error {
			for _, name := range cohort.Builtin() {
				co, _, err := cohort.Load(name)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "%s: %s\n", name, co.Description)
				for _, cs := range co.Cases {
					keys := make([]string, 0, len(cs.Dims))
					for k := range cs.Dims {
						keys = append(keys, k)
					}
					sort.Strings(keys)
					var dims []string
					for _, k := range keys {
						dims = append(dims, fmt.Sprintf("%s=%d", k, cs.Dims[k]))
					}
					fmt.Fprintf(c.App.Writer, "  %-24s %-10s %-28s %s seed %d\n", cs.ID, cs.Op, strings.Join(dims, " "), cs.Pattern, cs.Seed)
				}
			}
			return nil
		},
	}
}
