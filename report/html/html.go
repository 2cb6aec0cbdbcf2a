// Package html renders a checkpoint as one self-contained HTML page
// (tilepipe report): the results table, per-case plots of every sample by
// route (batch and single-call samples apart), the paired ratios with
// their intervals, the visit timeline by round, the failed visits with
// their reasons and the audit's verdict. Plots are SVG drawn here
// (chart.go) and written into the page, styles inline, no script and
// nothing fetched: the file opens the same offline, mailed or archived.
package html

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tilepipe/tilepipe/artifacts"
	"github.com/tilepipe/tilepipe/artifacts/samples"
	"github.com/tilepipe/tilepipe/report"
)

// Audit is what the page says of the checkpoint's audit (from its audit
// stage); a zero Audit says the checkpoint has none.
type Audit struct {
	Verdict   string `json:"verdict"`
	Integrity string `json:"integrity"`
	Claims    struct {
		Supported   int `json:"supported"`
		Unsupported int `json:"unsupported"`
	} `json:"claims"`
	Pinned bool   `json:"pinned"`
	Signed string `json:"signed"`
}

// Total is the rows the audit judged.
func (a Audit) Total() int { return a.Claims.Supported + a.Claims.Unsupported }

// Page is what the report shows.
type Page struct {
	Title   string
	Replay  string // the replay manifest digest
	Doc     artifacts.ReplayDoc
	Samples []samples.Row
	Audit   *Audit
}

// palette gives each route a color, in the order routes appear.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0x94, 0x67, 0xbd, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

func routeColor(routes []string, r string) color.RGBA {
	return palette[max(slices.Index(routes, r), 0)%len(palette)]
}

// jitter spreads the i-th of n points of one category across ±0.3.
func jitter(i, n int) float64 {
	if n < 2 {
		return 0
	}
	return -0.3 + 0.6*float64(i)/float64(n-1)
}

// sampleGlyphs is how samplePlot draws each kind: the novel samples (the
// claim) filled, the warm batch samples open, single calls as crosses.
var sampleGlyphs = []struct{ kind, glyph string }{
	{samples.KindNovel, glyphDot}, {samples.KindBatch, glyphRing}, {samples.KindSingle, glyphCross},
}

// samplePlot is one case's samples: for each route, its novel, batch and
// single samples' time per call, log scaled where they span more than a
// factor of 20.
func samplePlot(c string, routes []string, rows []samples.Row) (template.HTML, error) {
	ch := chart{w: 400, h: 300, title: c, ylabel: "ns per call", x: axis{names: routes}}
	lo, hi := math.Inf(1), 0.0
	for ri, r := range routes {
		for _, g := range sampleGlyphs {
			m := mark{kind: g.glyph, color: routeColor(routes, r)}
			var mine []samples.Row
			for _, s := range rows {
				if s.Case == c && s.Route == r && s.Kind == g.kind {
					mine = append(mine, s)
				}
			}
			for i, s := range mine {
				v := s.PerOpNs()
				m.pts = append(m.pts, [2]float64{float64(ri) + jitter(i, len(mine)), v})
				lo, hi = min(lo, v), max(hi, v)
			}
			if len(m.pts) > 0 {
				ch.marks = append(ch.marks, m) // the page says which glyph is which kind
			}
		}
	}
	if hi == 0 {
		return "", nil // no samples: a row that never timed
	}
	ch.y.log = hi/lo > 20
	return ch.svg(), nil
}

// ratioPlot is every paired ratio: its median with its interval, a row
// per (case, route), beside the line of no difference.
func ratioPlot(doc artifacts.ReplayDoc) (template.HTML, error) {
	bars := mark{kind: barsX, color: palette[0]}
	var labels []string
	for _, s := range doc.Summary {
		if s.RatioPairs == 0 {
			continue
		}
		bars.pts = append(bars.pts, [2]float64{s.Ratio, float64(len(labels))})
		bars.lo, bars.hi = append(bars.lo, s.RatioLo), append(bars.hi, s.RatioHi)
		labels = append(labels, s.Case+" "+s.Route)
	}
	if len(labels) == 0 {
		return "", nil
	}
	one := mark{kind: lineDashed, color: color.RGBA{0x44, 0x44, 0x44, 0xff}, pts: [][2]float64{{1, -0.5}, {1, float64(len(labels)) - 0.5}}}
	lo, hi := slices.Min(append(slices.Clone(bars.lo), 1)), slices.Max(append(slices.Clone(bars.hi), 1))
	ch := chart{w: 640, h: 60 + 24*float64(len(labels)), title: fmt.Sprintf("paired ratio vs %s (below 1 is faster)", doc.Config.Baseline),
		x: axis{min: lo - 0.05*(hi-lo), max: hi + 0.05*(hi-lo)}, y: axis{names: labels}, marks: []mark{one, bars}}
	if ch.x.min == ch.x.max {
		ch.x.min, ch.x.max = lo-0.05, hi+0.05
	}
	return ch.svg(), nil
}

// timeline is every visit at its start, seconds into the replay, by round:
// a color per route, failed visits as crosses.
func timeline(doc artifacts.ReplayDoc) (template.HTML, error) {
	if len(doc.Visits) == 0 {
		return "", nil
	}
	t0 := doc.Visits[0].Start
	for _, v := range doc.Visits {
		if v.Start.Before(t0) {
			t0 = v.Start
		}
	}
	ch := chart{w: 640, h: 300, title: "visits by round", xlabel: "seconds into the replay", ylabel: "round"}
	for _, r := range doc.Routes {
		for _, failed := range []bool{false, true} {
			m := mark{kind: glyphDot, name: r, color: routeColor(doc.Routes, r)}
			if failed {
				m.kind, m.name = glyphCross, r+" (failed)"
			}
			for _, v := range doc.Visits {
				if v.Route == r && (v.Status != artifacts.StatusPassed) == failed {
					m.pts = append(m.pts, [2]float64{v.Start.Sub(t0).Seconds(), float64(v.Round + 1)})
				}
			}
			if len(m.pts) > 0 {
				ch.marks = append(ch.marks, m)
				ch.legend = append(ch.legend, m)
			}
		}
	}
	rounds := 0.0
	for _, v := range doc.Visits {
		rounds = max(rounds, float64(v.Round+1))
	}
	// Room above the last round for the legend.
	ch.y.min, ch.y.max = 0, rounds*(1+0.12*float64(len(ch.legend)))
	return ch.svg(), nil
}

// Row is a results table row as the page shows it.
type Row struct {
	Case, Route, Status, Median, Range, Ratio, Interval, Verdict, Reason string
}

// Render writes the page.
func Render(pg Page) ([]byte, error) {
	var cases []string
	for _, s := range pg.Doc.Summary {
		if !slices.Contains(cases, s.Case) {
			cases = append(cases, s.Case)
		}
	}
	type casePlot struct {
		Case string
		SVG  template.HTML
	}
	var plots []casePlot
	for _, c := range cases {
		s, err := samplePlot(c, pg.Doc.Routes, pg.Samples)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", c, err)
		}
		if s != "" {
			plots = append(plots, casePlot{c, s})
		}
	}
	ratios, err := ratioPlot(pg.Doc)
	if err != nil {
		return nil, fmt.Errorf("plot ratios: %w", err)
	}
	tl, err := timeline(pg.Doc)
	if err != nil {
		return nil, fmt.Errorf("plot timeline: %w", err)
	}
	var rows []Row
	for _, s := range pg.Doc.Summary {
		r := Row{Case: s.Case, Route: s.Route, Status: s.Status, Reason: s.Reason, Verdict: s.Verdict}
		if s.Status == artifacts.StatusPassed && s.Samples > 0 {
			r.Median, r.Range = report.Duration(s.MedianNs), report.Duration(s.MinNs)+" – "+report.Duration(s.MaxNs)
		}
		switch {
		case s.Route == pg.Doc.Config.Baseline:
			r.Ratio = "baseline"
		case s.RatioPairs > 0:
			r.Ratio = fmt.Sprintf("%.3f", s.Ratio)
			r.Interval = fmt.Sprintf("%.3f – %.3f", s.RatioLo, s.RatioHi)
		}
		rows = append(rows, r)
	}
	type failedVisit struct {
		Index, Round        int
		Case, Route, Reason string
	}
	var failed []failedVisit
	for _, v := range pg.Doc.Visits {
		if v.Status != artifacts.StatusPassed {
			failed = append(failed, failedVisit{v.Index, v.Round + 1, v.Case, v.Route, v.Reason})
		}
	}
	var b bytes.Buffer
	err = page.Execute(&b, map[string]any{
		"Title": pg.Title, "Replay": pg.Replay, "Config": pg.Doc.Config, "Level": fmt.Sprintf("%g%%", 100*pg.Doc.Config.IntervalLevel()),
		"Rows": rows, "Plots": plots, "Ratios": ratios, "Timeline": tl, "Failed": failed, "Audit": pg.Audit,
	})
	return b.Bytes(), err
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;background:#fff}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;text-align:left}
th{background:#eee}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pass{background:#d9f2d9;border:2px solid #2c8c2c;padding:.5em 1em;display:inline-block}
.fail{background:#f8d7d7;border:2px solid #b22;padding:.5em 1em;display:inline-block}
.none{background:#eee;border:2px solid #888;padding:.5em 1em;display:inline-block}
.plots{display:flex;flex-wrap:wrap;gap:1em}code{font-size:90%}
</style></head><body>
<h1>{{.Title}}</h1>
<p>Replay <code>{{.Replay}}</code>: {{.Config.Rounds}} rounds, baseline {{.Config.Baseline}}, {{.Config.Threads}} threads; ratios are route time over baseline time per round, their intervals exact at {{.Level}}.</p>
<h2>Audit</h2>
{{with .Audit}}<div id="verdict" class="{{if eq .Verdict "pass"}}pass{{else}}fail{{end}}">audit verdict: <b>{{.Verdict}}</b>: checkpoint {{.Integrity}}; {{.Claims.Supported}} of {{.Total}} claims supported; {{if .Pinned}}pinned{{else}}not pinned{{end}}; {{.Signed}}</div>
{{else}}<div id="verdict" class="none">no audit stage in this checkpoint: run tilepipe audit</div>{{end}}
<h2>Results</h2>
<table id="results"><thead><tr><th>case</th><th>route</th><th>status</th><th>median per call</th><th>min – max</th><th>ratio</th><th>interval</th><th>verdict</th><th>reason</th></tr></thead><tbody>
{{range .Rows}}<tr data-case="{{.Case}}" data-route="{{.Route}}"><td>{{.Case}}</td><td>{{.Route}}</td><td>{{.Status}}</td><td class="n">{{.Median}}</td><td class="n">{{.Range}}</td><td class="n">{{.Ratio}}</td><td class="n">{{.Interval}}</td><td>{{.Verdict}}</td><td>{{.Reason}}</td></tr>
{{end}}</tbody></table>
{{if .Ratios}}<h2>Paired ratios</h2><div class="plot" id="ratios">{{.Ratios}}</div>{{end}}
<h2>Samples</h2><p>Every sample by route, time per call: novel samples (the claim, filled circles), warm batch samples (open circles) and single calls (crosses).</p>
<div class="plots">{{range .Plots}}<div class="plot" data-case="{{.Case}}">{{.SVG}}</div>{{end}}</div>
{{if .Timeline}}<h2>Visits</h2><div class="plot" id="timeline">{{.Timeline}}</div>{{end}}
<h2>Failed visits</h2>
{{if .Failed}}<table id="failed"><thead><tr><th>visit</th><th>round</th><th>case</th><th>route</th><th>reason</th></tr></thead><tbody>
{{range .Failed}}<tr><td class="n">{{.Index}}</td><td class="n">{{.Round}}</td><td>{{.Case}}</td><td>{{.Route}}</td><td>{{.Reason}}</td></tr>
{{end}}</tbody></table>{{else}}<p id="failed">Every visit passed.</p>{{end}}
</body></html>
`))

// Load reads the checkpoint in dir for its page: its replay stage
// (dir/replay, every blob re-hashed) with its samples, and its audit
// stage (dir/audit) where there is one, which must be the audit of that
// replay.
func Load(dir string) (Page, error) {
	pg := Page{Title: "tilepipe report: " + filepath.Base(filepath.Clean(dir))}
	st, err := artifacts.ReadStage(filepath.Join(dir, "replay"), &pg.Doc, nil)
	if err != nil {
		return Page{}, err
	}
	pg.Replay = string(st.Descriptor.Digest)
	if pg.Samples, err = samples.ReadFile(st.Store.Path(pg.Doc.Samples), memory.DefaultAllocator); err != nil {
		return Page{}, fmt.Errorf("replay %s: samples: %w", st.Store.Dir(), err)
	}
	ad := filepath.Join(dir, "audit")
	if _, err := os.Lstat(ad); errors.Is(err, os.ErrNotExist) {
		return pg, nil
	}
	aud, err := artifacts.OpenStage(ad, artifacts.AuditType, nil)
	if err != nil {
		return Page{}, err
	}
	if s := aud.Manifest.Subject; s == nil || s.Digest != st.Descriptor.Digest {
		return Page{}, fmt.Errorf("audit stage %s: its subject is not the replay manifest %s: the audit of another replay", ad, st.Descriptor.Digest)
	}
	b, err := aud.Statement()
	if err != nil {
		return Page{}, err
	}
	var stmt struct {
		Predicate Audit `json:"predicate"`
	}
	if err := json.Unmarshal(b, &stmt); err != nil {
		return Page{}, fmt.Errorf("audit stage %s: %w", ad, err)
	}
	pg.Audit = &stmt.Predicate
	return pg, nil
}
