package html

import (
	"image/color"
	"reflect"
	"strings"
	"testing"
)

// TestTicks: a linear axis ticks at 1-2-5 steps inside its range (no -0),
// a log axis at its decades with metric prefixes, a nominal axis at each
// category.
func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a      axis
		labels []string
	}{
		{"linear", axis{min: -0.05, max: 1.05}, []string{"0", "0.5", "1"}},
		{"linear wide", axis{min: 0, max: 730}, []string{"0", "200", "400", "600"}},
		{"log", axis{min: 1000, max: 1e6, log: true}, []string{"1k", "10k", "100k", "1M"}},
		{"nominal", axis{names: []string{"triton", "cublas"}}, []string{"triton", "cublas"}},
	} {
		if _, got := tc.a.ticks(); !reflect.DeepEqual(got, tc.labels) {
			t.Errorf("%s: ticks %q, want %q", tc.name, got, tc.labels)
		}
	}
	a := axis{log: true}
	if a.fit([]float64{3500, 0, 41000}); a.min != 1000 || a.max != 1e5 {
		t.Errorf("log fit of 3500..41000 (and a 0) = [%g, %g], want the decades [1000, 100000]", a.min, a.max)
	}
}

// TestChartSVG: one glyph per point, an error bar per ratio, the legend's
// names, and every text escaped (a case named like markup stays text).
func TestChartSVG(t *testing.T) {
	blue := color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	c := chart{w: 400, h: 300, title: `add <script>alert(1)</script>`, x: axis{names: []string{"a&b"}}, ylabel: "ns per call",
		marks: []mark{{kind: glyphDot, color: blue, pts: [][2]float64{{0, 10}, {0, 20}}}, {kind: glyphCross, color: blue, pts: [][2]float64{{0, 30}}},
			{kind: barsX, color: blue, pts: [][2]float64{{0, 15}}, lo: []float64{-0.2}, hi: []float64{0.2}}}}
	c.legend = []mark{{kind: glyphDot, name: "triton", color: blue}}
	s := string(c.svg())
	for _, want := range []string{`&lt;script&gt;alert(1)&lt;/script&gt;`, `a&amp;b`, `>triton</text>`, `fill="#1f77b4"`} {
		if !strings.Contains(s, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if strings.Contains(s, "<script") {
		t.Error("svg holds the title's markup unescaped")
	}
	// 2 dots, the bar's centre and the legend's dot; the cross and the bar are paths.
	if n, p := strings.Count(s, "<circle"), strings.Count(s, "<path"); n != 4 || p != 2 {
		t.Errorf("svg has %d circles and %d paths, want 4 and 2", n, p)
	}
}
