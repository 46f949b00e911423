package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kvlease/kvlease/bench/stats"
)

func TestWriteDir(t *testing.T) {
	f := newFakeServer(t)
	f.metrics = "vllm:kv_cache_usage_perc 0\nkvlease_kv_blocks{state=\"held\"} 0\n"
	cfg := testConfig(f)
	cfg.MetricsURLs = []string{f.srv.URL, f.srv.URL + "/metrics"}
	res := run(t, cfg)
	dir := filepath.Join(t.TempDir(), "out")
	paths, err := res.WriteDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ResultsFile, PlotLatencyCDF, PlotKVUsage, PlotHeldBlocks} // no leases metric served
	if len(res.Metrics) != 2 {
		t.Fatalf("one endpoint spelled twice gives %d series, want 2", len(res.Metrics))
	}
	if len(paths) != len(want) {
		t.Fatalf("wrote %v, want %v", paths, want)
	}
	for i, p := range paths {
		if filepath.Base(p) != want[i] {
			t.Fatalf("wrote %v, want %v", paths, want)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("%s is not a PNG", p)
		}
	}
	fh, err := os.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	back, err := ReadJSON(fh)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Summary, res.Summary) || len(back.Records) != len(res.Records) {
		t.Fatal("results.json does not read back")
	}
}

func TestPlotsWithoutData(t *testing.T) {
	dir := t.TempDir()
	// A failed run: nothing to plot, no file, no error.
	res := &Result{Records: []Record{{Outcome: OutcomeError}}}
	paths, err := res.WritePlots(dir)
	if err != nil || len(paths) != 0 {
		t.Fatalf("paths %v, err %v", paths, err)
	}
	// Non-positive samples on a log axis are left out, not a panic.
	curves := []Curve{{Name: "a", Points: []stats.Point{{X: 0, Y: 0.5}, {X: 2, Y: 1}}}, {Name: "empty"}}
	ok, err := PlotCDF(filepath.Join(dir, "c.png"), "t", "x", true, curves)
	if !ok || err != nil || len(curves[0].Points) != 2 {
		t.Fatalf("ok %v, err %v, caller's curve %v", ok, err, curves[0].Points)
	}
	ok, err = PlotCDF(filepath.Join(dir, "d.png"), "t", "x", true, []Curve{{Name: "a", Points: []stats.Point{{X: 0, Y: 1}}}})
	if ok || err != nil {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	ok, err = PlotSeries(filepath.Join(dir, "s.png"), "t", "y", []Curve{{Name: "one point", Points: []stats.Point{{X: 0, Y: 0}}}})
	if !ok || err != nil {
		t.Fatalf("ok %v, err %v", ok, err)
	}
}
