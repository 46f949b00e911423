package stats

import (
	"math"
	"slices"
	"time"
)

// Summary describes a set of samples. A Summary of no samples has Count 0
// and every other field 0; check Count before reading the rest.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
}

// Summarize computes a Summary of xs, ignoring NaN and ±Inf samples.
// It sorts a copy; xs is left untouched. O(n log n).
func Summarize(xs []float64) Summary {
	s := Sorted(xs)
	if len(s) == 0 {
		return Summary{}
	}
	var sum float64
	for _, x := range s {
		sum += x
	}
	return Summary{
		Count: len(s),
		Mean:  sum / float64(len(s)),
		Min:   s[0],
		Max:   s[len(s)-1],
		P50:   PercentileSorted(s, 50),
		P90:   PercentileSorted(s, 90),
		P99:   PercentileSorted(s, 99),
	}
}

// Sorted returns a sorted copy of the finite samples of xs (NaN and ±Inf
// dropped). The caller owns the result.
func Sorted(xs []float64) []float64 {
	s := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			s = append(s, x)
		}
	}
	slices.Sort(s)
	return s
}

// Percentile returns the p-th percentile of the finite samples of xs, or 0
// when there are none. See PercentileSorted for the definition.
func Percentile(xs []float64, p float64) float64 {
	return PercentileSorted(Sorted(xs), p)
}

// PercentileSorted returns the p-th percentile (p in [0, 100]) of sorted,
// which must be sorted ascending and finite (as Sorted returns).
//
// It interpolates linearly between closest ranks, the definition of
// numpy.percentile's default and of vLLM's benchmark scripts, so figures
// compare with theirs: rank = p/100 × (n−1), and the result lies between
// sorted[floor(rank)] and sorted[ceil(rank)]. p below 0 or NaN counts as 0,
// above 100 as 100. No samples give 0; one sample gives that sample.
func PercentileSorted(sorted []float64, p float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return 0
	case n == 1 || !(p > 0):
		return sorted[0]
	case p >= 100:
		return sorted[n-1]
	}
	rank := p / 100 * float64(n-1)
	lo := int(math.Floor(rank))
	hi := lo + 1
	if hi >= n {
		return sorted[n-1]
	}
	frac := rank - float64(lo)
	return sorted[lo] + frac*(sorted[hi]-sorted[lo])
}

// Rate returns count per second over d, or 0 when d is not positive: a run
// that lasted no time has no meaningful rate, and 0 encodes as JSON where
// +Inf would not.
func Rate(count float64, d time.Duration) float64 {
	if d <= 0 || math.IsNaN(count) || math.IsInf(count, 0) {
		return 0
	}
	return count / d.Seconds()
}

// Point is one point of a curve: a CDF (X sample, Y cumulative fraction) or
// a time series (X seconds, Y value).
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// CDF returns the empirical cumulative distribution of the finite samples
// of xs as at most maxPoints points, X ascending, Y the fraction of samples
// ≤ X, the last point (max, 1). With more samples than maxPoints it keeps
// evenly spaced ranks, always including the first and the last, so a plot
// of millions of samples stays small. maxPoints below 2 counts as 2. No
// samples give nil.
func CDF(xs []float64, maxPoints int) []Point {
	s := Sorted(xs)
	n := len(s)
	if n == 0 {
		return nil
	}
	maxPoints = max(maxPoints, 2)
	if n <= maxPoints {
		out := make([]Point, 0, n)
		for i, x := range s {
			// Equal samples share the fraction of the last of them.
			if i+1 < n && s[i+1] == x {
				continue
			}
			out = append(out, Point{X: x, Y: float64(i+1) / float64(n)})
		}
		return out
	}
	out := make([]Point, 0, maxPoints)
	for k := range maxPoints {
		i := int(math.Round(float64(k) * float64(n-1) / float64(maxPoints-1)))
		// The fraction ≤ s[i] counts every sample equal to it.
		j := i
		for j+1 < n && s[j+1] == s[i] {
			j++
		}
		p := Point{X: s[i], Y: float64(j+1) / float64(n)}
		if len(out) > 0 && out[len(out)-1].X == p.X {
			out[len(out)-1] = p
			continue
		}
		out = append(out, p)
	}
	return out
}

// Histogram counts samples in Bins equal-width bins over [Min, Max].
type Histogram struct {
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Counts []int   `json:"counts"`
}

// NewHistogram bins the finite samples of xs into bins equal-width bins
// spanning their range; the last bin includes Max. bins below 1 counts as
// 1. All samples equal: one value range of width 0, every sample in the
// first bin. No samples: Counts of zeros and Min = Max = 0.
func NewHistogram(xs []float64, bins int) Histogram {
	bins = max(bins, 1)
	h := Histogram{Counts: make([]int, bins)}
	s := Sorted(xs)
	if len(s) == 0 {
		return h
	}
	h.Min, h.Max = s[0], s[len(s)-1]
	width := (h.Max - h.Min) / float64(bins)
	for _, x := range s {
		i := 0
		if width > 0 {
			i = min(int((x-h.Min)/width), bins-1)
		}
		h.Counts[i]++
	}
	return h
}

// BinEdges returns the bins+1 edges of h's bins.
func (h Histogram) BinEdges() []float64 {
	n := len(h.Counts)
	edges := make([]float64, n+1)
	for i := range edges {
		edges[i] = h.Min + (h.Max-h.Min)*float64(i)/float64(n)
	}
	return edges
}
