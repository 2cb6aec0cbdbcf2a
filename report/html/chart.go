package html

import (
	"fmt"
	"html/template"
	"image/color"
	"math"
	"strconv"
	"strings"
)

// A chart is one small SVG plot: points, horizontal error bars and lines
// over a linear, logarithmic or nominal axis each way, with a title, axis
// labels and a legend. The report needs three kinds of plot and nothing
// of a plotting library's backends or fonts (issue 28: gonum/plot linked
// five canvases and twelve embedded fonts, 8 MB of the binary); text is
// SVG text in the page's sans-serif, so no font metrics are needed here
// beyond an estimate of a label's width for the margins.
type chart struct {
	w, h                  float64 // px
	title, xlabel, ylabel string
	x, y                  axis
	marks                 []mark
	legend                []mark // marks with a name, in order
}

// axis is a scale: linear over [min, max], logarithmic (log), or nominal
// (names: category i at i, over [-0.5, len-0.5]).
type axis struct {
	min, max float64
	log      bool
	names    []string
}

// glyphs and lines a mark draws.
const (
	glyphDot   = "dot"   // a filled circle
	glyphRing  = "ring"  // an open circle
	glyphCross = "cross" // an x
	lineDashed = "dashed"
	barsX      = "xbars" // a horizontal error bar per point, [lo, hi]
)

type mark struct {
	kind   string
	name   string // the legend's text ("" for none)
	color  color.RGBA
	pts    [][2]float64
	lo, hi []float64 // barsX: each point's interval
}

// fit sets an axis's range to cover vs (linear or log), unless set.
func (a *axis) fit(vs []float64) {
	if len(a.names) > 0 || a.min < a.max {
		return
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if a.log && v <= 0 {
			continue
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	switch {
	case math.IsInf(lo, 1):
		lo, hi = 0, 1
	case a.log:
		lo, hi = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
		if lo == hi {
			hi *= 10
		}
	default:
		if lo == hi {
			lo, hi = lo-1, hi+1
		}
		pad := 0.05 * (hi - lo)
		lo, hi = lo-pad, hi+pad
	}
	a.min, a.max = lo, hi
}

// frac is where v falls in the axis, 0 to 1.
func (a axis) frac(v float64) float64 {
	if len(a.names) > 0 {
		return (v + 0.5) / float64(len(a.names))
	}
	if a.log {
		return (math.Log10(max(v, a.min)) - math.Log10(a.min)) / (math.Log10(a.max) - math.Log10(a.min))
	}
	return (v - a.min) / (a.max - a.min)
}

// ticks are the axis's labelled positions: every category, the decades
// of a log axis, and 1-2-5 steps of a linear one.
func (a axis) ticks() (vs []float64, labels []string) {
	switch {
	case len(a.names) > 0:
		for i, n := range a.names {
			vs, labels = append(vs, float64(i)), append(labels, n)
		}
	case a.log:
		for e := math.Ceil(math.Log10(a.min) - 1e-9); e <= math.Log10(a.max)+1e-9; e++ {
			v := math.Pow(10, e)
			vs, labels = append(vs, v), append(labels, si(v))
		}
	default:
		raw := (a.max - a.min) / 5
		step := math.Pow(10, math.Floor(math.Log10(raw)))
		for _, m := range []float64{1, 2, 5, 10} {
			if step*m >= raw {
				step *= m
				break
			}
		}
		for v := math.Ceil(a.min/step) * step; v <= a.max+step*1e-9; v += step {
			if v = math.Round(v/step) * step; v == 0 {
				v = 0 // not -0
			}
			vs, labels = append(vs, v), append(labels, strconv.FormatFloat(v, 'g', 6, 64))
		}
	}
	return vs, labels
}

// si writes a power of ten with a metric prefix: 1, 10, 100, 1k, 10k, ...
func si(v float64) string {
	for _, p := range []struct {
		f float64
		s string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= p.f {
			return strconv.FormatFloat(v/p.f, 'g', 6, 64) + p.s
		}
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// textWidth estimates a label's width at the chart's 11 px font.
func textWidth(s string) float64 { return 6.2 * float64(len([]rune(s))) }

func rgb(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func esc(s string) string { return template.HTMLEscapeString(s) }

// fitAxes fits both axes to every mark's points (and bars' ends).
func (c *chart) fitAxes() {
	var xs, ys []float64
	for _, m := range c.marks {
		for i, p := range m.pts {
			xs, ys = append(xs, p[0]), append(ys, p[1])
			if m.kind == barsX {
				xs = append(xs, m.lo[i], m.hi[i])
			}
		}
	}
	c.x.fit(xs)
	c.y.fit(ys)
}

// svg renders the chart as an <svg> element for the page.
func (c chart) svg() template.HTML {
	c.fitAxes()
	_, ylabels := c.y.ticks()
	left := 14.0
	for _, l := range ylabels {
		left = max(left, textWidth(l)+14)
	}
	if c.ylabel != "" {
		left += 16
	}
	top, bottom, right := 24.0, 34.0, 12.0
	if c.xlabel != "" {
		bottom += 14
	}
	pw, ph := c.w-left-right, c.h-top-bottom
	X := func(v float64) float64 { return left + pw*c.x.frac(v) }
	Y := func(v float64) float64 { return top + ph*(1-c.y.frac(v)) }
	var b strings.Builder
	f := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`, c.w, c.h, c.w, c.h)
	f(`<rect x="0" y="0" width="%.0f" height="%.0f" fill="#fff"/>`, c.w, c.h)
	f(`<text x="%.1f" y="15" text-anchor="middle" font-size="12">%s</text>`, left+pw/2, esc(c.title))
	xv, xl := c.x.ticks()
	for i, v := range xv {
		x := X(v)
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`, x, top, x, top+ph)
		f(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, top+ph+14, esc(xl[i]))
	}
	yv, yl := c.y.ticks()
	for i, v := range yv {
		y := Y(v)
		f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`, left, y, left+pw, y)
		f(`<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`, left-5, y+4, esc(yl[i]))
	}
	f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`, left, top, pw, ph)
	if c.xlabel != "" {
		f(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, left+pw/2, c.h-8, esc(c.xlabel))
	}
	if c.ylabel != "" {
		f(`<text transform="translate(12 %.1f) rotate(-90)" text-anchor="middle">%s</text>`, top+ph/2, esc(c.ylabel))
	}
	for _, m := range c.marks {
		col := rgb(m.color)
		switch m.kind {
		case lineDashed:
			for i := 1; i < len(m.pts); i++ {
				f(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 4"/>`,
					X(m.pts[i-1][0]), Y(m.pts[i-1][1]), X(m.pts[i][0]), Y(m.pts[i][1]), col)
			}
		case barsX:
			for i, p := range m.pts {
				y, x0, x1 := Y(p[1]), X(m.lo[i]), X(m.hi[i])
				f(`<path d="M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f" stroke="%s" fill="none"/>`, x0, y, x1, x0, y-4, y+4, x1, y-4, y+4, col)
				f(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, X(p[0]), y, col)
			}
		default:
			for _, p := range m.pts {
				glyph(&b, m.kind, X(p[0]), Y(p[1]), col)
			}
		}
	}
	ly := top + 12
	for _, m := range c.legend {
		x := left + pw - textWidth(m.name) - 22
		glyph(&b, m.kind, x, ly-4, rgb(m.color))
		f(`<text x="%.1f" y="%.1f">%s</text>`, x+9, ly, esc(m.name))
		ly += 15
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it is escaped
}

// glyph draws one point's glyph at (x, y).
func glyph(b *strings.Builder, kind string, x, y float64, col string) {
	switch kind {
	case glyphCross:
		fmt.Fprintf(b, `<path d="M%.1f %.1fl6 6M%.1f %.1fl6 -6" stroke="%s" stroke-width="1.3"/>`, x-3, y-3, x-3, y+3, col)
	case glyphRing:
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.6" fill="none" stroke="%s"/>`, x, y, col)
	default:
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.6" fill="%s"/>`, x, y, col)
	}
}
