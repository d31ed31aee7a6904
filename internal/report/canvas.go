package bench

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

type canvas struct {
	path string
	c    vg.CanvasWriterTo
	w, h vg.Length
}

func newCanvas(path string, w, h vg.Length) (*canvas, error) {
	var c vg.CanvasWriterTo
	switch ext := chartExt(path); ext {
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	case "svg":
		c = vgsvg.New(w, h)
	default:
		return nil, fmt.Errorf("chart %s: format %q not supported (png, svg)", path, ext)
	}
	return &canvas{path: path, c: c, w: w, h: h}, nil
}

// draw lays the plots out side by side and writes the file.
func (c *canvas) draw(plots []*plot.Plot) error {
	dc := draw.New(c.c)
	t := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	row := [][]*plot.Plot{plots}
	cs := plot.Align(row, t, dc)
	for i, p := range plots {
		p.Draw(cs[0][i])
	}
	f, err := os.Create(c.path)
	if err != nil {
		return err
	}
	if _, err := c.c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func plotColor(i int) color.Color { return plotutil.Color(i) }
