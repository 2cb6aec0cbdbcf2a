package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/tilepipe/tilepipe/cohort"
	"github.com/tilepipe/tilepipe/replay"
	"github.com/urfave/cli/v2"
)

func cohortsCommand() *cli.Command {
	return &cli.Command{
		Name:   "cohorts",
		Usage:  "list the built-in cohorts and their cases",
		Action: func(c *cli.Context) error { return listCohorts(c.App.Writer) },
	}
}

// listCohorts writes every built-in cohort, how replay times it, and its
// cases.
func listCohorts(w io.Writer) error {
	for _, name := range cohort.Builtin() {
		co, _, err := cohort.Load(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: %s\n  timed in %s\n", name, co.Description, timing(co))
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
			fmt.Fprintf(w, "  %-24s %-10s %-28s %s seed %d\n", cs.ID, cs.Op, strings.Join(dims, " "), cs.Pattern, cs.Seed)
		}
	}
	return nil
}

// timing is how replay times a cohort by default: its rounds and target,
// or replay's defaults.
func timing(co *cohort.Cohort) string {
	rounds := "replay's default rounds"
	if co.Rounds > 0 {
		rounds = plural(co.Rounds, "round")
	}
	switch t := co.Target; {
	case t == nil:
		return fmt.Sprintf("%s, then adaptive rounds to replay's default target (±%g%%)", rounds, replay.DefaultConfig.Target*100)
	case *t == 0:
		return rounds + ", fixed"
	default:
		return fmt.Sprintf("%s, then adaptive rounds to ±%g%%", rounds, *t)
	}
}

// plural is "1 round", "6 rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
