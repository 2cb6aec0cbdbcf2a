package audit

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/report"
)

// doc is a small replay document: two routes of one case, one of them
// the baseline.
func doc() artifacts.ReplayDoc {
	return artifacts.ReplayDoc{
		Config: artifacts.ReplayConfig{Rounds: 2, Samples: 2, Singles: 1, SampleMs: 1, Threads: 2, Baseline: "b", Seed: 1, Bootstrap: 100, Sets: 2},
		Routes: []string{"a", "b"}, Cases: []string{"c"},
		Summary: []artifacts.Summary{
			{Case: "c", Route: "a", Status: artifacts.StatusPassed, Visits: 2, Samples: 4, MedianNs: 1200, MinNs: 1100, MaxNs: 1500, ChannelNs: 30000, Ratio: 0.8, RatioMin: 0.7, RatioMax: 0.9, RatioLo: 0.7, RatioHi: 0.9, RatioPairs: 2, Verdict: "faster"},
			{Case: "c", Route: "b", Status: artifacts.StatusPassed, Visits: 2, Samples: 4, MedianNs: 1500, MinNs: 1400, MaxNs: 1700, ChannelNs: 30000},
		},
		Closure: []artifacts.ClosureCheck{{Round: 0, When: "before", Status: artifacts.StatusPassed}},
	}
}

func TestResultsAgree(t *testing.T) {
	d := doc()
	table := report.Table(d)
	lines := strings.Split(table, "\n")
	n := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "| c | a |") })
	row := lines[n]
	edited := strings.Replace(row, "| 1.2 µs |", "| 1 ns |", 1)
	tests := []struct {
		name   string
		stored string
		want   []string
	}{
		{"the rendered table", table, nil},
		{"a number edited", strings.Replace(table, row, edited, 1),
			[]string{fmt.Sprintf("results.md line %d: %q, the document renders %q", n+1, edited, row)}},
		{"a row dropped", strings.Replace(table, row+"\n", "", 1),
			[]string{fmt.Sprintf("results.md line %d: %q, the document renders %q", n+1, lines[n+1], row)}},
		{"a row added", table + "| c | x | passed |\n",
			[]string{fmt.Sprintf("results.md line %d: %q, the document renders %q", len(lines), "| c | x | passed |", "")}},
		{"no trailing newline", strings.TrimSuffix(table, "\n"),
			[]string{fmt.Sprintf("results.md line %d: %q, the document renders %q", len(lines), "(no line)", "")}},
	}
	for _, tt := range tests {
		if got := resultsAgree([]byte(tt.stored), d); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("resultsAgree(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
