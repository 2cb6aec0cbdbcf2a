package audit

import (
	"fmt"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/report"
)

// resultsAgree compares the stored results table (the results.md layer)
// with the table the replay document renders: what a person reads must be
// what the checked summaries say, byte for byte.
func resultsAgree(stored []byte, d artifacts.ReplayDoc) []string {
	want := report.Table(d)
	if string(stored) == want {
		return nil
	}
	sl, wl := strings.Split(string(stored), "\n"), strings.Split(want, "\n")
	line := func(ls []string, i int) string {
		if i < len(ls) {
			return ls[i]
		}
		return "(no line)"
	}
	for i := range max(len(sl), len(wl)) {
		if line(sl, i) != line(wl, i) {
			return []string{fmt.Sprintf("results.md line %d: %q, the document renders %q", i+1, line(sl, i), line(wl, i))}
		}
	}
	return []string{"results.md differs from the table the document renders"}
}

// resultsCheck checks the results.md layer.
func resultsCheck(cp *checkpoint, f *facts) finding {
	var p []string
	b, err := readLayer(cp.rep, "results.md")
	if err != nil {
		p = append(p, err.Error())
	} else {
		p = resultsAgree(b, cp.rdoc)
	}
	return finding{problems: p, summary: "results.md is the table the replay document renders, byte for byte"}
}

// readLayer reads the verified layer titled title of st.
func readLayer(st *artifacts.Stage, title string) ([]byte, error) {
	d, err := st.Layer(title)
	if err != nil {
		return nil, err
	}
	return st.Store.ReadVerified(d.Digest, title, artifacts.MaxDocBytes)
}
