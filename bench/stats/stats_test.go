package stats

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"
)

func TestPercentileKnownValues(t *testing.T) {
	// 1..10: numpy.percentile(range(1, 11), p) gives these.
	ten := []float64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	for _, tc := range []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"one sample p0", []float64{7}, 0, 7},
		{"one sample p99", []float64{7}, 99, 7},
		{"two samples median", []float64{1, 3}, 50, 2},
		{"p0 is min", ten, 0, 1},
		{"p100 is max", ten, 100, 10},
		{"p50 between ranks", ten, 50, 5.5},
		{"p90", ten, 90, 9.1},
		{"p99", ten, 99, 9.91},
		{"p25", ten, 25, 3.25},
		{"negative p clamps", ten, -5, 1},
		{"p over 100 clamps", ten, 250, 10},
		{"NaN p counts as 0", ten, math.NaN(), 1},
		{"equal samples", []float64{4, 4, 4, 4}, 90, 4},
		{"NaN and Inf ignored", []float64{math.NaN(), 1, math.Inf(1), 3, math.Inf(-1)}, 50, 2},
		{"only NaN", []float64{math.NaN()}, 50, 0},
		{"negative samples", []float64{-3, -1}, 50, -2},
	} {
		got := Percentile(tc.xs, tc.p)
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Percentile(%v, %v) = %v, want %v", tc.name, tc.xs, tc.p, got, tc.want)
		}
	}
}

func TestPercentileLeavesInputAlone(t *testing.T) {
	xs := []float64{3, 1, 2}
	Percentile(xs, 50)
	Summarize(xs)
	CDF(xs, 10)
	NewHistogram(xs, 2)
	if !slices.Equal(xs, []float64{3, 1, 2}) {
		t.Fatalf("input modified: %v", xs)
	}
}

func TestPercentileMonotoneInP(t *testing.T) {
	xs := []float64{5, 1, 9, 2, 2, 8, 100, 0.5}
	s := Sorted(xs)
	prev := math.Inf(-1)
	for p := 0.0; p <= 100; p += 0.5 {
		v := PercentileSorted(s, p)
		if v < prev || v < s[0] || v > s[len(s)-1] {
			t.Fatalf("p=%v: %v after %v, outside [%v, %v] or decreasing", p, v, prev, s[0], s[len(s)-1])
		}
		prev = v
	}
}

func TestSummarize(t *testing.T) {
	if got := Summarize(nil); got != (Summary{}) {
		t.Fatalf("Summarize(nil) = %+v, want zero", got)
	}
	xs := make([]float64, 0, 100)
	for i := 100; i >= 1; i-- {
		xs = append(xs, float64(i))
	}
	got := Summarize(xs)
	want := Summary{Count: 100, Mean: 50.5, Min: 1, Max: 100, P50: 50.5, P90: 90.1, P99: 99.01}
	if math.Abs(got.P90-want.P90) > 1e-9 || math.Abs(got.P99-want.P99) > 1e-9 {
		t.Fatalf("Summarize(1..100) = %+v, want %+v", got, want)
	}
	got.P90, got.P99 = want.P90, want.P99
	if got != want {
		t.Fatalf("Summarize(1..100) = %+v, want %+v", got, want)
	}
	// A summary of NaN only is "no data", and encodes as JSON.
	s := Summarize([]float64{math.NaN(), math.Inf(1)})
	if s.Count != 0 {
		t.Fatalf("Summarize(NaN, Inf).Count = %d, want 0", s.Count)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Fatal(err)
	}
}

func TestRate(t *testing.T) {
	for _, tc := range []struct {
		count float64
		d     time.Duration
		want  float64
	}{
		{100, 10 * time.Second, 10},
		{3, 1500 * time.Millisecond, 2},
		{0, time.Second, 0},
		{5, 0, 0},
		{5, -time.Second, 0},
		{math.Inf(1), time.Second, 0},
		{math.NaN(), time.Second, 0},
		{1, time.Millisecond, 1000},
	} {
		if got := Rate(tc.count, tc.d); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Rate(%v, %v) = %v, want %v", tc.count, tc.d, got, tc.want)
		}
	}
}

func TestCDF(t *testing.T) {
	if got := CDF(nil, 10); got != nil {
		t.Fatalf("CDF(nil) = %v, want nil", got)
	}
	got := CDF([]float64{3, 1, 2, 2}, 10)
	want := []Point{{1, 0.25}, {2, 0.75}, {3, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("CDF = %v, want %v", got, want)
	}
	// Downsampled: bounded, ascending, ends at (max, 1), starts at min.
	xs := make([]float64, 10000)
	for i := range xs {
		xs[i] = float64((i * 7919) % 10000)
	}
	got = CDF(xs, 50)
	if len(got) > 50 || len(got) < 2 {
		t.Fatalf("len(CDF) = %d, want 2..50", len(got))
	}
	if got[0].X != 0 || got[len(got)-1] != (Point{9999, 1}) {
		t.Fatalf("CDF ends = %v .. %v", got[0], got[len(got)-1])
	}
	for i := 1; i < len(got); i++ {
		if got[i].X <= got[i-1].X || got[i].Y < got[i-1].Y {
			t.Fatalf("CDF not ascending at %d: %v then %v", i, got[i-1], got[i])
		}
	}
	// Many duplicates when downsampling: fractions count every equal sample.
	dup := make([]float64, 1000)
	for i := range dup {
		if i >= 900 {
			dup[i] = 1
		}
	}
	got = CDF(dup, 3)
	want = []Point{{0, 0.9}, {1, 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("CDF(dups) = %v, want %v", got, want)
	}
	// maxPoints below 2 still gives both ends.
	got = CDF([]float64{1, 2, 3, 4}, 0)
	if !slices.Equal(got, []Point{{1, 0.25}, {4, 1}}) {
		t.Fatalf("CDF(maxPoints 0) = %v", got)
	}
}

func TestHistogram(t *testing.T) {
	h := NewHistogram([]float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 5)
	if !slices.Equal(h.Counts, []int{2, 2, 2, 2, 3}) || h.Min != 0 || h.Max != 10 {
		t.Fatalf("histogram = %+v", h)
	}
	if !slices.Equal(h.BinEdges(), []float64{0, 2, 4, 6, 8, 10}) {
		t.Fatalf("edges = %v", h.BinEdges())
	}
	h = NewHistogram([]float64{5, 5, 5}, 3)
	if !slices.Equal(h.Counts, []int{3, 0, 0}) {
		t.Fatalf("equal samples = %+v", h)
	}
	h = NewHistogram(nil, 0)
	if !slices.Equal(h.Counts, []int{0}) {
		t.Fatalf("empty = %+v", h)
	}
	total := 0
	for _, c := range NewHistogram([]float64{math.NaN(), 1, 2, math.Inf(1)}, 4).Counts {
		total += c
	}
	if total != 2 {
		t.Fatalf("NaN/Inf counted: total %d", total)
	}
}

func BenchmarkSummarize(b *testing.B) {
	xs := make([]float64, 100000)
	for i := range xs {
		xs[i] = float64((i * 7919) % 100003)
	}
	for b.Loop() {
		Summarize(xs)
	}
}
