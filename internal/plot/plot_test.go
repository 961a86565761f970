package plot

import (
	"encoding/xml"
	"math"
	"strings"
	"testing"
)

func TestWriteSVGIsWellFormedAndSelfContained(t *testing.T) {
	c := Chart{Title: "ops <&> nodes", XTitle: "nodes", YTitle: "ops/s", X: []string{"1", "2", "3"},
		Series: []Series{{Name: "partitioned", Y: []float64{1e6, 2e6, 3e6}}, {Name: "random", Y: []float64{1e6, math.NaN(), 1.5e6}}}}
	var b strings.Builder
	if err := c.WriteSVG(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	d := xml.NewDecoder(strings.NewReader(svg))
	polylines, circles := 0, 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "polyline":
				polylines++
			case "circle":
				circles++
			case "script", "image", "use", "style":
				t.Fatalf("a %s element: the SVG must stand alone", se.Name.Local)
			}
		}
	}
	if polylines != 2 || circles != 5 { // the NaN point is left out
		t.Fatalf("%d lines and %d markers, want 2 and 5", polylines, circles)
	}
	if !strings.Contains(svg, "ops &lt;&amp;&gt; nodes") || !strings.Contains(svg, ">3M<") {
		t.Fatalf("title not escaped or axis top not 3M:\n%s", svg)
	}
	if strings.Contains(svg, "http://") && strings.Count(svg, "http://") != 1 {
		t.Fatal("the SVG references something besides its namespace")
	}
}

func TestWriteSVGRefusesEmptyAndRagged(t *testing.T) {
	var b strings.Builder
	if err := (&Chart{Title: "empty"}).WriteSVG(&b); err == nil {
		t.Fatal("an empty chart was drawn")
	}
	c := Chart{X: []string{"a", "b"}, Series: []Series{{Name: "s", Y: []float64{1}}}}
	if err := c.WriteSVG(&b); err == nil {
		t.Fatal("a series with fewer values than x positions was drawn")
	}
}

func TestNiceScaleAndShort(t *testing.T) {
	for _, tc := range []struct{ ymax, step, top float64 }{{3e6, 1e6, 3e6}, {7.3, 2, 8}, {0, 1, 5}, {101, 50, 150}} {
		if s, top := niceScale(tc.ymax); s != tc.step || top != tc.top {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", tc.ymax, s, top, tc.step, tc.top)
		}
	}
	for v, want := range map[float64]string{1250000: "1.25M", 999: "999", 20500: "20.5K", 3e9: "3G", 0.5: "0.5"} {
		if got := Short(v); got != want {
			t.Errorf("Short(%v) = %q, want %q", v, got, want)
		}
	}
}
