package plot

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Series is one line: a name and a value at each x position (NaN: none).
type Series struct {
	Name string
	Y    []float64
}

// Chart is a line chart over categorical x positions.
type Chart struct {
	Title, XTitle, YTitle string
	X                     []string // the x positions' labels, left to right
	Series                []Series
}

// Geometry of the drawing, in SVG user units.
const (
	width, height              = 900.0, 420.0
	left, right, top, bottom   = 80.0, 300.0, 40.0, 60.0
	plotWidth, plotHeight      = width - left - right, height - top - bottom
	yTicks                     = 5
	legendLine, legendRowSpace = 24.0, 18.0
)

// palette is eight colours that stay apart in print and for the common
// colour-vision deficiencies (Okabe and Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

// WriteSVG draws c. An empty chart (no x positions or no series) is an
// error: there is nothing to show.
func (c *Chart) WriteSVG(w io.Writer) error {
	if len(c.X) == 0 || len(c.Series) == 0 {
		return fmt.Errorf("plot: %q has no points", c.Title)
	}
	ymax := 0.0
	for _, s := range c.Series {
		if len(s.Y) != len(c.X) {
			return fmt.Errorf("plot: series %q has %d values for %d x positions", s.Name, len(s.Y), len(c.X))
		}
		for _, y := range s.Y {
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				ymax = max(ymax, y)
			}
		}
	}
	step, top10 := niceScale(ymax)
	xAt := func(i int) float64 {
		if len(c.X) == 1 {
			return left + plotWidth/2
		}
		return left + plotWidth*float64(i)/float64(len(c.X)-1)
	}
	yAt := func(y float64) float64 { return top + plotHeight*(1-y/top10) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, esc(c.Title))
	// Grid and y axis labels.
	for i := 0; i <= yTicks; i++ {
		v := step * float64(i)
		if v > top10+step/2 {
			break
		}
		y := yAt(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+plotWidth, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, esc(Short(v)))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top+plotHeight, left+plotWidth, top+plotHeight)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, top+plotHeight)
	for i, x := range c.X {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", xAt(i), top+plotHeight+18, esc(x))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+plotWidth/2, height-14, esc(c.XTitle))
	fmt.Fprintf(&b, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">%s</text>`+"\n", top+plotHeight/2, top+plotHeight/2, esc(c.YTitle))
	// Lines, markers and the legend.
	for k, s := range c.Series {
		col := palette[k%len(palette)]
		dash := ""
		if k >= len(palette) {
			dash = ` stroke-dasharray="6 3"`
		}
		var pts []string
		for i, y := range s.Y {
			if math.IsNaN(y) || math.IsInf(y, 0) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(i), yAt(y)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s, %s: %s</title></circle>`+"\n", xAt(i), yAt(y), col, esc(s.Name), esc(c.X[i]), esc(Short(y)))
		}
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", col, dash, strings.Join(pts, " "))
		}
		ly := top + 8 + legendRowSpace*float64(k)
		lx := left + plotWidth + 16
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+legendLine, ly, col, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+legendLine+6, ly+4, esc(s.Name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceScale picks the y axis: a step of 1, 2 or 5 times a power of ten
// such that yTicks steps cover ymax, and the axis' top.
func niceScale(ymax float64) (step, top float64) {
	if ymax <= 0 {
		return 1, yTicks
	}
	raw := ymax / yTicks
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	return step, step * math.Ceil(ymax/step)
}

// Short prints v with a K, M or G suffix and at most three significant
// digits: 1250000 is "1.25M".
func Short(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return trim(v/1e9) + "G"
	case a >= 1e6:
		return trim(v/1e6) + "M"
	case a >= 1e3:
		return trim(v/1e3) + "K"
	}
	return trim(v)
}

func trim(v float64) string {
	s := fmt.Sprintf("%.3g", v)
	if strings.Contains(s, "e") {
		s = fmt.Sprintf("%.0f", v)
	}
	return s
}

func esc(s string) string { return html.EscapeString(s) }
