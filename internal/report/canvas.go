package report

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"github.com/irqpilot/irqpilot/internal/outfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The parts every chart of irqpilot shares — recordings', bench's, tune's
// and the simulator's: the image file, the series colours, the value axis
// and the room the legend needs.

// SavePlots lays plots out side by side on a w × h image and writes it to
// path, in the format its extension names (.png, .svg; none: png).
func SavePlots(path string, w, h vg.Length, plots ...*plot.Plot) error {
	format := "png"
	if ext := extOf(path); ext != "" {
		format = ext
	}
	if format != "png" && format != "svg" {
		return fmt.Errorf("chart %s: format %q not supported (png, svg)", path, format)
	}
	c, err := newCanvas(format, w, h)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	t := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	cs := plot.Align([][]*plot.Plot{plots}, t, dc)
	for i, p := range plots {
		drawPlot(p, cs[0][i])
	}
	f, err := outfile.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Abort()
		return err
	}
	return f.Close()
}

// drawPlot draws p on c with its legend on a background of its own: the
// data first, then a white box with a thin border where the legend goes,
// then the legend, so no line or bar runs through its names. (gonum draws
// the legend straight over the data.)
func drawPlot(p *plot.Plot, c draw.Canvas) {
	leg := p.Legend
	p.Legend = plot.NewLegend()
	p.Draw(c)
	p.Legend = leg
	r := legendBox(p, p.DataCanvas(c))
	if r.Size().X <= 0 {
		return
	}
	dc := p.DataCanvas(c)
	box := r
	pad := vg.Points(3)
	box.Min.X -= pad
	box.Min.Y -= pad
	box.Max.X += pad
	box.Max.Y += pad
	outline := box.Path()
	dc.SetColor(color.White)
	dc.Fill(outline)
	dc.SetLineStyle(draw.LineStyle{Color: color.Gray{Y: 0xc0}, Width: vg.Points(0.5)})
	dc.Stroke(outline)
	p.Legend.Draw(dc)
}

// hasLegend reports whether p's legend names anything.
func hasLegend(p *plot.Plot) bool { return p.Legend.Rectangle(draw.Canvas{}).Size().X > 0 }

// legendBox is where p's legend is drawn on the data canvas c (zero when
// it has no entries): its size from gonum, its corner as Legend.Draw
// places it (gonum's Legend.Rectangle puts a left legend on the right).
func legendBox(p *plot.Plot, c draw.Canvas) vg.Rectangle {
	l := &p.Legend
	size := l.Rectangle(c)
	w, h := size.Size().X, size.Size().Y
	if w <= 0 || h <= 0 {
		return vg.Rectangle{}
	}
	var r vg.Rectangle
	if l.Left {
		r.Min.X = c.Min.X + l.XOffs
		r.Max.X = r.Min.X + w
	} else {
		r.Max.X = c.Max.X + l.XOffs
		r.Min.X = r.Max.X - w
	}
	if l.Top {
		r.Max.Y = c.Max.Y + l.YOffs
		r.Min.Y = r.Max.Y - h
	} else {
		r.Min.Y = c.Min.Y + l.YOffs
		r.Max.Y = r.Min.Y + h
	}
	return r
}

// seriesColours tell up to ten series apart (the "tab10" palette): the
// plotutil default has seven, three of them reddish, and repeats its red
// for the eighth.
var seriesColours = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

// seriesColour is the i-th series' colour.
func seriesColour(i int) color.Color { return seriesColours[i%len(seriesColours)] }

// legendRoom is the top of a value axis whose data reach peak, with room
// above for a legend of n rows in the plot's top corner.
func legendRoom(peak float64, n int) float64 { return peak * (1.12 + 0.085*float64(n)) }

// visibleShare is the smallest part of a value axis a series must reach to
// be seen (and named in a legend): about two pixels of a 4-inch chart.
const visibleShare = 0.01

// visible reports whether a series reaching most is seen on an axis whose
// data reach peak.
func visible(most, peak float64) bool { return peak > 0 && most >= visibleShare*peak }

// niceStep is the largest 1, 2 or 5 times a power of ten not above x.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{5, 2} {
		if m*p <= x {
			return m * p
		}
	}
	return p
}

// valueTicks are five to ten labelled ticks at 1, 2 or 5 times a power of
// ten, labelled like 250, 1.5k, 2M (gonum's default aims at three and
// prints "250.00").
func valueTicks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	step := niceStep((hi - lo) / 5)
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		v = math.Round(v/step) * step
		ticks = append(ticks, plot.Tick{Value: v, Label: compactLabel(v)})
		if minor := v + step/2; minor < hi {
			ticks = append(ticks, plot.Tick{Value: minor})
		}
	}
	return ticks
}

// compactLabel prints v with k and M for thousands and millions.
func compactLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 4, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

// addSeries draws one line per series (xys), each in its own colour,
// named in the legend; points marks each value with a dot.
func addSeries(p *plot.Plot, names []string, series []plotter.XYs, points bool) error {
	for i, xys := range series {
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("%s: %w", names[i], err)
		}
		l.Color = seriesColour(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		if !points {
			p.Legend.Add(names[i], l)
			continue
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("%s: %w", names[i], err)
		}
		s.Color, s.Shape, s.Radius = seriesColour(i), draw.CircleGlyph{}, vg.Points(2.5)
		p.Add(s)
		p.Legend.Add(names[i], l, s)
	}
	return nil
}
