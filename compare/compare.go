// Package compare sets two checkpoints side by side (tilepipe compare
// --old DIR --new DIR): the same cases timed by the same routes in two
// runs (two machines, two versions of a compiler, before and after a
// change).
//
// # Matching
//
// A case is matched by its digest: the sha256 of its specification as
// the capture recorded it (op, dims, dtype, seed, input pattern, numeric
// policy, ranking contract, device) and of the oracle version that
// computed its packet, so two cases of one id but another seed or
// another oracle are not the same case. Rows are (case digest, route).
// Every row not matched, or matched but not timed on both sides, is
// listed with the reason; none is paired silently.
//
// # The ratio
//
// A matched row's ratio is its new median time per call over its old
// one (below 1: faster in the new checkpoint). Over the matched rows the
// summary is the geometric mean of those ratios, with a percentile
// bootstrap interval over the rows (95%, 10000 resamples, a fixed seed):
// how much the cohort as sampled moved, not a per-row verdict (each
// checkpoint's own paired ratios are that). Below 6 matched rows there is
// no interval.
package compare

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/report"
)

// Side is one checkpoint as compare reads it.
type Side struct {
	Dir    string `json:"dir"`
	Replay string `json:"replay"` // the replay manifest digest
	// cases by digest, and each row's summary by (digest, route)
	ids  map[string]string // digest -> case id
	rows map[artifacts.Pair]artifacts.Summary
}

// Row is one (case, route) of either side.
type Row struct {
	Case   string  `json:"case"`
	Digest string  `json:"caseDigest"`
	Route  string  `json:"route"`
	OldNs  float64 `json:"oldNs,omitempty"`
	NewNs  float64 `json:"newNs,omitempty"`
	Ratio  float64 `json:"ratio,omitempty"` // new/old; 0 where not compared
	Reason string  `json:"reason,omitempty"`
}

// Result is the comparison.
type Result struct {
	Old     Side  `json:"old"`
	New     Side  `json:"new"`
	Matched []Row `json:"matched"`
	// Unmatched are rows of one side only, or of both but not timed on
	// both, each with why.
	Unmatched []Row   `json:"unmatched"`
	GeoMean   float64 `json:"geoMean"`
	Lo        float64 `json:"lo,omitempty"`
	Hi        float64 `json:"hi,omitempty"`
	Interval  bool    `json:"interval"` // false: fewer than MinRows
}

// MinRows is the fewest matched rows given an interval.
const MinRows = 6

// Resamples and Seed make the bootstrap.
const (
	Resamples = 10000
	Seed      = 13
)

// CaseDigest is the digest compare matches a case by: its specification
// and the oracle version of its packet.
func CaseDigest(c artifacts.CapturedCase, oracleVersion string) string {
	b, _ := json.Marshal(struct {
		Case   any    `json:"case"`
		Oracle string `json:"oracle"`
	}{c.Case, oracleVersion})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// open reads a checkpoint's capture and replay stages (every blob
// re-hashed) and checks the replay is of that capture.
func open(dir string) (Side, error) {
	var cdoc artifacts.CaptureDoc
	cap, err := artifacts.ReadStage(filepath.Join(dir, "capture"), &cdoc, nil)
	if err != nil {
		return Side{}, err
	}
	var rdoc artifacts.ReplayDoc
	rep, err := artifacts.ReadStage(filepath.Join(dir, "replay"), &rdoc, nil)
	if err != nil {
		return Side{}, err
	}
	if rdoc.Capture != cap.Descriptor.Digest {
		return Side{}, fmt.Errorf("checkpoint %s: the replay is of capture %s, the capture stage is %s", dir, rdoc.Capture, cap.Descriptor.Digest)
	}
	s := Side{Dir: dir, Replay: string(rep.Descriptor.Digest), ids: map[string]string{}, rows: map[artifacts.Pair]artifacts.Summary{}}
	digestOf := map[string]string{}
	for _, c := range cdoc.Cases {
		d := CaseDigest(c, cdoc.Oracle)
		s.ids[d], digestOf[c.Case.ID] = c.Case.ID, d
	}
	for _, sum := range rdoc.Summary {
		d, ok := digestOf[sum.Case]
		if !ok {
			return Side{}, fmt.Errorf("checkpoint %s: the replay has case %s, which its capture does not", dir, sum.Case)
		}
		s.rows[artifacts.Pair{Case: d, Route: sum.Route}] = sum
	}
	return s, nil
}

// Run compares the checkpoints in oldDir and newDir.
func Run(oldDir, newDir string) (*Result, error) {
	o, err := open(oldDir)
	if err != nil {
		return nil, err
	}
	n, err := open(newDir)
	if err != nil {
		return nil, err
	}
	r := &Result{Old: o, New: n, Matched: []Row{}, Unmatched: []Row{}}
	keys := map[artifacts.Pair]bool{}
	for k := range o.rows {
		keys[k] = true
	}
	for k := range n.rows {
		keys[k] = true
	}
	order := make([]artifacts.Pair, 0, len(keys))
	for k := range keys {
		order = append(order, k)
	}
	id := func(d string) string {
		if c, ok := o.ids[d]; ok {
			return c
		}
		return n.ids[d]
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if id(a.Case) != id(b.Case) {
			return id(a.Case) < id(b.Case)
		}
		if a.Case != b.Case {
			return a.Case < b.Case
		}
		return a.Route < b.Route
	})
	for _, k := range order {
		old, inOld := o.rows[k]
		nw, inNew := n.rows[k]
		row := Row{Case: id(k.Case), Digest: k.Case, Route: k.Route}
		switch {
		case !inOld && sameID(o, id(k.Case)):
			row.Reason = "case " + row.Case + " differs: its specification or oracle version in the old checkpoint is another (digest " + otherDigest(o, row.Case) + ")"
		case !inNew && sameID(n, id(k.Case)):
			row.Reason = "case " + row.Case + " differs: its specification or oracle version in the new checkpoint is another (digest " + otherDigest(n, row.Case) + ")"
		case !inOld:
			row.Reason = "only in the new checkpoint"
		case !inNew:
			row.Reason = "only in the old checkpoint"
		case old.Status != artifacts.StatusPassed || old.Samples == 0:
			row.Reason = fmt.Sprintf("old: %s %s", old.Status, old.Reason)
		case nw.Status != artifacts.StatusPassed || nw.Samples == 0:
			row.Reason = fmt.Sprintf("new: %s %s", nw.Status, nw.Reason)
		}
		if inOld {
			row.OldNs = old.MedianNs
		}
		if inNew {
			row.NewNs = nw.MedianNs
		}
		if row.Reason != "" {
			r.Unmatched = append(r.Unmatched, row)
			continue
		}
		row.Ratio = nw.MedianNs / old.MedianNs
		r.Matched = append(r.Matched, row)
	}
	r.GeoMean, r.Lo, r.Hi, r.Interval = geoMean(r.Matched)
	return r, nil
}

func sameID(s Side, caseID string) bool {
	for _, c := range s.ids {
		if c == caseID {
			return true
		}
	}
	return false
}

func otherDigest(s Side, caseID string) string {
	for d, c := range s.ids {
		if c == caseID {
			return artifacts.Short(artifacts.Digest(d))
		}
	}
	return ""
}

// geoMean is the geometric mean of the rows' ratios and, with MinRows or
// more, its percentile bootstrap interval over the rows.
func geoMean(rows []Row) (g, lo, hi float64, ok bool) {
	if len(rows) == 0 {
		return 0, 0, 0, false
	}
	logs := make([]float64, len(rows))
	for i, r := range rows {
		logs[i] = math.Log(r.Ratio)
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	g = math.Exp(mean(logs))
	if len(rows) < MinRows {
		return g, 0, 0, false
	}
	rng := rand.New(rand.NewPCG(Seed, 0))
	means := make([]float64, Resamples)
	buf := make([]float64, len(logs))
	for i := range means {
		for j := range buf {
			buf[j] = logs[rng.IntN(len(logs))]
		}
		means[i] = mean(buf)
	}
	slices.Sort(means)
	return g, math.Exp(means[int(0.025*Resamples)]), math.Exp(means[int(0.975*Resamples)-1]), true
}

// Markdown renders the comparison for people: the summary, the matched
// rows, then every row not compared and why.
func Markdown(r *Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# tilepipe compare\n\nold: %s (replay %s)\nnew: %s (replay %s)\n\n", r.Old.Dir, r.Old.Replay, r.New.Dir, r.New.Replay)
	switch {
	case len(r.Matched) == 0:
		b.WriteString("No row matched: nothing to compare.\n")
	case r.Interval:
		fmt.Fprintf(&b, "Geometric mean of new/old over %d matched rows: %.3f [%.3f – %.3f] (95%% bootstrap over the rows; below 1 the new checkpoint is faster).\n", len(r.Matched), r.GeoMean, r.Lo, r.Hi)
	default:
		fmt.Fprintf(&b, "Geometric mean of new/old over %d matched rows: %.3f (too few rows for an interval: %d or more give one).\n", len(r.Matched), r.GeoMean, MinRows)
	}
	if len(r.Matched) > 0 {
		b.WriteString("\n| case | route | old median per op | new median per op | new/old |\n|---|---|---:|---:|---:|\n")
		for _, m := range r.Matched {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %.3f |\n", m.Case, m.Route, report.Duration(m.OldNs), report.Duration(m.NewNs), m.Ratio)
		}
	}
	if len(r.Unmatched) > 0 {
		fmt.Fprintf(&b, "\n## not compared (%d)\n\n| case | route | why |\n|---|---|---|\n", len(r.Unmatched))
		for _, u := range r.Unmatched {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", u.Case, u.Route, strings.ReplaceAll(u.Reason, "|", `\|`))
		}
	}
	return b.String()
}
