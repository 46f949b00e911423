package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/bench/stats"
)

const prefillMetrics = `# HELP kvlease_kv_blocks KV blocks by state.
# TYPE kvlease_kv_blocks gauge
kvlease_kv_blocks{state="free"} 900
kvlease_kv_blocks{state="evictable"} 90
kvlease_kv_blocks{state="held"} 10
kvlease_leases_active 2
kvlease_leases_granted_total 50
kvlease_leases_released_total{reason="read_done"} 40
kvlease_leases_released_total{reason="rejected"} 5
kvlease_leases_released_total{reason="aborted"} 3
kvlease_leases_released_total{reason="expired"} 0
kvlease_lease_block_seconds_total{outcome="read"} 12.5
kvlease_lease_block_seconds_total{outcome="unread"} 3.25
kvlease_leases_active{broken="x 7
`

const decodeMetrics = `kvlease_kv_blocks{state="held"} 4
kvlease_leases_active 0
kvlease_remote_prefill_fallbacks_total{reason="lease_gone"} 2
kvlease_remote_prefill_fallbacks_total{reason="unreachable"} 1
`

func TestParseLeaseFigures(t *testing.T) {
	f, err := parseLeaseFigures(strings.NewReader(prefillMetrics))
	if err != nil {
		t.Fatal(err)
	}
	want := LeaseFigures{HeldBlocks: 10, LeasesActive: 2, Granted: 50,
		Released:         map[string]float64{"read_done": 40, "rejected": 5, "aborted": 3, "expired": 0},
		BlockSecondsRead: 12.5, BlockSecondsUnread: 3.25}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("got %+v\nwant %+v", f, want)
	}
	if got := f.ReleasedText(); got != "aborted 3, read_done 40, rejected 5" {
		t.Fatalf("ReleasedText %q", got)
	}
	if f.Settled() || (LeaseFigures{}).ReleasedText() != "none" || !(LeaseFigures{}).Settled() {
		t.Fatal("Settled or ReleasedText of the zero figures")
	}
}

func TestScrapeLeasesSumsEndpoints(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/p/metrics", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(prefillMetrics)) })
	mux.HandleFunc("/d/metrics", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(decodeMetrics)) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	f := ScrapeLeases(context.Background(), srv.Client(), []string{srv.URL + "/p/metrics", srv.URL + "/d/metrics", down.URL}, time.Second)
	if f.HeldBlocks != 14 || f.LeasesActive != 2 || f.Fallbacks != 3 || f.Released["read_done"] != 40 || f.BlockSecondsUnread != 3.25 {
		t.Fatalf("figures %+v", f)
	}
	if !reflect.DeepEqual(f.Unreachable, []string{down.URL + "/metrics"}) || f.Settled() {
		t.Fatalf("unreachable %v", f.Unreachable)
	}
}

func TestSumAndMergeSeries(t *testing.T) {
	series := []MetricSeries{
		{URL: "a", Metric: MetricHeldBlocks, Points: []stats.Point{{X: 0, Y: 1}, {X: 1, Y: 2}, {X: 2, Y: 3}}},
		{URL: "b", Metric: MetricHeldBlocks, Points: []stats.Point{{X: 0, Y: 10}, {X: 2, Y: 30}}}, // b missed a round
		{URL: "a", Metric: MetricLeasesActive, Points: []stats.Point{{X: 0, Y: 100}}},
	}
	want := []stats.Point{{X: 0, Y: 11}, {X: 1, Y: 2}, {X: 2, Y: 33}}
	if got := SumSeries(series, MetricHeldBlocks); !reflect.DeepEqual(got, want) {
		t.Fatalf("SumSeries = %v, want %v", got, want)
	}
	more := []MetricSeries{
		{URL: "b", Metric: MetricHeldBlocks, Points: []stats.Point{{X: 3, Y: 0}}},
		{URL: "c", Metric: MetricHeldBlocks, Points: []stats.Point{{X: 3, Y: 5}}},
	}
	merged := mergeSeries(series, more)
	if len(merged) != 4 || len(merged[1].Points) != 3 || merged[1].Points[2].X != 3 || merged[3].URL != "c" {
		t.Fatalf("merged %+v", merged)
	}
}
