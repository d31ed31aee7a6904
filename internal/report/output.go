package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// FormatOf picks the output format from a file name: "png", "svg" or "html".
func FormatOf(name string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".png", ".svg":
		return ext[1:], nil
	case ".html", ".htm":
		return "html", nil
	default:
		return "", fmt.Errorf("%s: unknown report format %q (use .html, .png or .svg)", name, ext)
	}
}

// DPI of PNG output.
const DPI = 96

type canvas interface {
	vg.CanvasSizer
	io.WriterTo
}

// WriteImage draws all charts one below the other into one PNG or SVG.
func WriteImage(w io.Writer, format string, charts []Chart, width vg.Length) error {
	var h vg.Length
	for _, c := range charts {
		h += c.Height
	}
	c, err := newCanvas(format, width, h)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	top := h
	for _, ch := range charts {
		sub := dc
		sub.Rectangle = vg.Rectangle{Min: vg.Point{X: 0, Y: top - ch.Height}, Max: vg.Point{X: width, Y: top}}
		// A little margin between stacked charts.
		sub = draw.Crop(sub, 0.1*vg.Inch, -0.15*vg.Inch, 0.05*vg.Inch, -0.1*vg.Inch)
		drawPlot(ch.Plot, sub)
		top -= ch.Height
	}
	_, err = c.WriteTo(w)
	return err
}

// newCanvas is an empty w × h image in format ("png", "svg").
func newCanvas(format string, w, h vg.Length) (canvas, error) {
	switch format {
	case "png":
		return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(DPI))}, nil
	case "svg":
		return vgsvg.New(w, h), nil
	}
	return nil, fmt.Errorf("unknown image format %q", format)
}

// extOf is a file name's extension, lower case, without the dot.
func extOf(name string) string { return strings.TrimPrefix(strings.ToLower(filepath.Ext(name)), ".") }

func imageBytes(format string, charts []Chart, width vg.Length) ([]byte, error) {
	var b bytes.Buffer
	err := WriteImage(&b, format, charts, width)
	return b.Bytes(), err
}

// WriteHTML writes a self-contained page: a summary table per recording and
// every chart as an inline PNG data: URI (no network, no external files).
// PNG rather than SVG because gonum's SVG names its fonts, which a browser
// may not have; the PNG has them rasterised.
func WriteHTML(w io.Writer, runs []*Run, charts []Chart, width vg.Length) error {
	type img struct {
		Title string
		Src   template.URL
	}
	type row struct {
		Host, File, Start, Duration      string
		Samples, CPUs                    int
		HotCPU                           string
		HotIRQSoft, MeanIRQSoft, MeanIdl string
		Notes                            string
	}
	data := struct {
		Generated string
		Runs      []row
		Images    []img
	}{Generated: time.Now().Format(time.RFC3339)}
	for _, r := range runs {
		means := r.MeanCPUs()
		hot, hotV, sumIS, sumIdle, n := -1, -1.0, 0.0, 0.0, 0
		for _, m := range means {
			if math.IsNaN(m.Idle) {
				continue
			}
			if v := m.IRQ + m.SoftIRQ; v > hotV {
				hot, hotV = m.ID, v
			}
			sumIS += m.IRQ + m.SoftIRQ
			sumIdle += m.Idle
			n++
		}
		var notes []string
		if r.Truncated {
			notes = append(notes, "recording cut off mid-line (recorder killed); read up to the last complete sample")
		}
		if r.Skipped > 0 {
			notes = append(notes, fmt.Sprintf("%d interval(s) skipped: %s", r.Skipped, r.SkipReason))
		}
		data.Runs = append(data.Runs, row{
			Host: r.Host, File: filepath.Base(r.File), Start: r.Start.Format(time.RFC3339),
			Duration: r.Duration().Round(time.Second).String(), Samples: len(r.Loads) + 1 + r.Skipped, CPUs: len(r.CPUs),
			HotCPU:     fmt.Sprint(hot),
			HotIRQSoft: fmt.Sprintf("%.1f", hotV), MeanIRQSoft: fmt.Sprintf("%.1f", sumIS/math.Max(1, float64(n))),
			MeanIdl: fmt.Sprintf("%.1f", sumIdle/math.Max(1, float64(n))), Notes: strings.Join(notes, "; "),
		})
	}
	for _, c := range charts {
		b, err := imageBytes("png", []Chart{c}, width)
		if err != nil {
			return fmt.Errorf("chart %s: %w", c.Name, err)
		}
		data.Images = append(data.Images, img{Title: c.Title,
			Src: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(b))})
	}
	return page.Execute(w, data)
}

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>irqpilot report</title>
<style>
body{font-family:sans-serif;margin:1.5em auto;max-width:1000px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}
th{background:#f4f4f4}td:first-child,td:nth-child(2){text-align:left}
img{width:100%;height:auto;border:1px solid #eee;margin:.5em 0}
.note{color:#a40}
</style></head><body>
<h1>irqpilot report</h1>
<p>Generated {{.Generated}} from {{len .Runs}} recording(s). Utilisation is percent of each CPU's time; irq = hard interrupt context, softirq = deferred interrupt work (NET_RX, BLOCK …).</p>
<table><tr><th>host</th><th>file</th><th>start</th><th>duration</th><th>samples</th><th>CPUs</th><th>hottest CPU</th><th>its irq+soft %</th><th>mean irq+soft %</th><th>mean idle %</th></tr>
{{range .Runs}}<tr><td>{{.Host}}</td><td>{{.File}}</td><td>{{.Start}}</td><td>{{.Duration}}</td><td>{{.Samples}}</td><td>{{.CPUs}}</td><td>{{.HotCPU}}</td><td>{{.HotIRQSoft}}</td><td>{{.MeanIRQSoft}}</td><td>{{.MeanIdl}}</td></tr>
{{if .Notes}}<tr><td colspan="10" class="note">{{.Host}}: {{.Notes}}</td></tr>{{end}}{{end}}</table>
{{range .Images}}<h2>{{.Title}}</h2>
<img alt="{{.Title}}" src="{{.Src}}">
{{end}}</body></html>
`))
