package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/kvlease/kvlease/bench/stats"
)

// Curve is one named line of a plot.
type Curve struct {
	Name   string
	Points []stats.Point
}

// cdfPoints bounds the points per CDF curve: a plot needs no more.
const cdfPoints = 500

// plot sizes.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 4.5 * vg.Inch
)

// PlotCDF writes a PNG of the cumulative distributions of curves (X in the
// unit named by xLabel, Y a fraction) to path, with a logarithmic X axis
// when logX (points with X ≤ 0 are then left out). Curves without points
// are left out; with none left, no file is written and ok is false.
func PlotCDF(path, title, xLabel string, logX bool, curves []Curve) (ok bool, err error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "cumulative fraction"
	p.Y.Min, p.Y.Max = 0, 1
	if logX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		curves = slices.Clone(curves) // the caller's curves are not changed
		for i := range curves {
			var kept []stats.Point
			for _, pt := range curves[i].Points {
				if pt.X > 0 {
					kept = append(kept, pt)
				}
			}
			curves[i].Points = kept
		}
	}
	return savePlot(p, path, curves, true)
}

// PlotSeries writes a PNG of time series (X seconds since the start) to
// path; like PlotCDF it writes nothing when no curve has points.
func PlotSeries(path, title, yLabel string, curves []Curve) (ok bool, err error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "time since start (s)"
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	return savePlot(p, path, curves, false)
}

// plainTicks labels ticks without trailing zeros ("250", not "250.00").
type plainTicks struct{ plot.Ticker }

func (t plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := t.Ticker.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label == "" {
			continue
		}
		if v, err := strconv.ParseFloat(ts[i].Label, 64); err == nil {
			ts[i].Label = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return ts
}

func savePlot(p *plot.Plot, path string, curves []Curve, steps bool) (bool, error) {
	p.Add(plotter.NewGrid())
	if _, log := p.X.Scale.(plot.LogScale); !log {
		p.X.Tick.Marker = plainTicks{p.X.Tick.Marker}
	}
	p.Y.Tick.Marker = plainTicks{p.Y.Tick.Marker}
	p.Title.Padding = vg.Points(6)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(6), -vg.Points(4)
	n, top := 0, 0.0
	for i, c := range curves {
		if len(c.Points) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(c.Points))
		for j, pt := range c.Points {
			xys[j] = plotter.XY{X: pt.X, Y: pt.Y}
			top = max(top, pt.Y)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return false, fmt.Errorf("bench: plot %s: %w", filepath.Base(path), err)
		}
		if steps {
			l.StepStyle = plotter.PostStep
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / len(plotutil.DefaultColors))
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(c.Name, l)
		n++
	}
	if n == 0 {
		return false, nil
	}
	if !steps {
		// Room above the highest point for the legend.
		p.Y.Max = max(top*1.25, 1)
	}
	if err := p.Save(plotWidth, plotHeight, path); err != nil {
		return false, fmt.Errorf("bench: plot %s: %w", filepath.Base(path), err)
	}
	return true, nil
}

// latencies returns the samples of one latency of the completed requests,
// in milliseconds.
func (r *Result) latencies(which string) []float64 {
	var xs []float64
	for i := range r.Records {
		rec := &r.Records[i]
		if rec.Outcome != OutcomeOK {
			continue
		}
		switch which {
		case "ttft":
			if rec.Chunks > 0 {
				xs = append(xs, rec.TTFTSeconds*1e3)
			}
		case "itl":
			for _, v := range rec.InterTokenSeconds {
				xs = append(xs, v*1e3)
			}
		case "tpot":
			if v, ok := rec.tpotSeconds(); ok {
				xs = append(xs, v*1e3)
			}
		case "e2e":
			xs = append(xs, rec.E2ESeconds*1e3)
		}
	}
	return xs
}

// Plot file names written by WritePlots.
const (
	PlotLatencyCDF   = "latency_cdf.png"
	PlotKVUsage      = "kv_cache_usage.png"
	PlotHeldBlocks   = "held_blocks.png"
	PlotLeasesActive = "leases_active.png"
)

// WritePlots writes the PNG plots of r into dir (which must exist) and
// returns the paths written: the latency CDFs, and one time series per
// scraped metric that has data.
func (r *Result) WritePlots(dir string) ([]string, error) {
	var written []string
	add := func(name string, ok bool, err error) error {
		if ok {
			written = append(written, filepath.Join(dir, name))
		}
		return err
	}
	var cdfs []Curve
	for _, l := range []struct{ key, name string }{{"ttft", "TTFT"}, {"itl", "inter-token"}, {"tpot", "TPOT"}, {"e2e", "end-to-end"}} {
		cdfs = append(cdfs, Curve{Name: l.name, Points: stats.CDF(r.latencies(l.key), cdfPoints)})
	}
	ok, err := PlotCDF(filepath.Join(dir, PlotLatencyCDF), "Latency CDF (completed requests)", "latency (ms, log scale)", true, cdfs)
	if err := add(PlotLatencyCDF, ok, err); err != nil {
		return written, err
	}
	for _, m := range []struct{ metric, file, title, unit string }{
		{MetricKVUsage, PlotKVUsage, "KV-cache usage (" + MetricKVUsage + ")", "fraction of blocks in use"},
		{MetricHeldBlocks, PlotHeldBlocks, "Held KV blocks (" + MetricHeldBlocks + ")", "blocks"},
		{MetricLeasesActive, PlotLeasesActive, "Active leases (" + MetricLeasesActive + ")", "leases"},
	} {
		var curves []Curve
		for _, s := range r.Metrics {
			if s.Metric == m.metric {
				curves = append(curves, Curve{Name: shortURL(s.URL), Points: s.Points})
			}
		}
		ok, err := PlotSeries(filepath.Join(dir, m.file), m.title, m.unit, curves)
		if err := add(m.file, ok, err); err != nil {
			return written, err
		}
	}
	return written, nil
}

// shortURL drops the scheme and a trailing /metrics, for legends.
func shortURL(u string) string {
	u = strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	return strings.TrimSuffix(u, "/metrics")
}

// ResultsFile is the name of the JSON file WriteDir writes.
const ResultsFile = "results.json"

// WriteDir creates dir if needed and writes results.json and the plots
// into it. It returns the paths written, results.json first.
func (r *Result) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	path := filepath.Join(dir, ResultsFile)
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	err = r.WriteJSON(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("bench: writing %s: %w", path, err)
	}
	plots, err := r.WritePlots(dir)
	return append([]string{path}, plots...), err
}
