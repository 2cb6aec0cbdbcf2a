// Package report renders checkpoint documents for people: the results
// table a replay writes as results.md (and that the audit renders again
// and compares byte for byte).
package report

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
)

// Table renders the summaries as a markdown table, for people.
func Table(doc artifacts.ReplayDoc) string {
	var b bytes.Buffer
	c := doc.Config
	fmt.Fprintf(&b, "# tilepipe replay results\n\n%d rounds x %d routes, %d samples of >= %g ms after %g ms warm-up, %d threads; ratio = route time / %s time per round (below 1 is faster), 95%% bootstrap interval of the median ratio. A sample's time is replay's own span of it, except on a GPU: there it is the CUDA-event span of the launches, which must lie inside replay's span. Channel = median span of an empty sample (no call), which each CPU batch sample includes once.\n\n",
		c.Rounds, len(doc.Routes), c.Samples, c.SampleMs, c.WarmupMs, c.Threads, c.Baseline)
	fmt.Fprintf(&b, "| case | route | status | median per op | min – max | channel | ratio vs %s [min – max] | 95%% interval | verdict |\n", c.Baseline)
	b.WriteString("|---|---|---|---:|---|---:|---|---|---|\n")
	for _, s := range doc.Summary {
		if s.Status != artifacts.StatusPassed {
			fmt.Fprintf(&b, "| %s | %s | %s | - | - | - | - | - | %s |\n", s.Case, s.Route, s.Status, escape(s.Reason))
			continue
		}
		ratio, interval, verdict := "baseline", "", ""
		if s.RatioPairs > 0 {
			ratio = fmt.Sprintf("%.3f [%.3f – %.3f]", s.Ratio, s.RatioMin, s.RatioMax)
			interval = fmt.Sprintf("%.3f – %.3f", s.RatioLo, s.RatioHi)
			verdict = s.Verdict
		} else if s.Route != c.Baseline {
			ratio = "-"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s – %s | %s | %s | %s | %s |\n", s.Case, s.Route, s.Status, Duration(s.MedianNs), Duration(s.MinNs), Duration(s.MaxNs), Duration(s.ChannelNs), ratio, interval, verdict)
	}
	var failedClosure []string
	for _, cc := range doc.Closure {
		if cc.Status != artifacts.StatusPassed {
			failedClosure = append(failedClosure, cc.Reason)
		}
	}
	if len(failedClosure) > 0 {
		fmt.Fprintf(&b, "\nBinary closure checks FAILED:\n\n- %s\n", strings.Join(failedClosure, "\n- "))
	} else {
		fmt.Fprintf(&b, "\nBinary closures re-hashed before and after each round: %d checks passed.\n", len(doc.Closure))
	}
	return b.String()
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Duration formats nanoseconds for people.
func Duration(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "-"
	case ns >= 1e9:
		return fmt.Sprintf("%.3g s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.3g ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.3g µs", ns/1e3)
	}
	return fmt.Sprintf("%.3g ns", ns)
}
