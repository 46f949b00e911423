package metrics

import (
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// InterTokens gathers inter-token latencies of one request for
// Metrics.AddInterTokens, which adds them to the histogram at once: one
// atomic update per bucket used instead of several per token (a request
// of a fast model has all its gaps in one bucket). Not safe for concurrent
// use; the zero value is empty.
type InterTokens struct {
	counts [numInterTokenBuckets + 1]uint32 // per bucket, the last +Inf
	sum    float64
	n      uint32
}

// numInterTokenBuckets is len(InterTokenBuckets).
const numInterTokenBuckets = len(interTokenBounds)

// Observe records one gap.
func (b *InterTokens) Observe(d time.Duration) {
	v := d.Seconds()
	// The first bucket whose bound is >= v, as sort.SearchFloat64s finds
	// it, scanned from the smallest: a fast model's gaps are in the first.
	i := 0
	for i < numInterTokenBuckets && !(interTokenBounds[i] >= v) {
		i++
	}
	b.counts[i]++
	b.sum += v
	b.n++
}

// Len is the number of gaps recorded and not yet added.
func (b *InterTokens) Len() int { return int(b.n) }

// AddInterTokens adds the gaps b recorded to the inter-token latency
// histogram and empties b.
func (m *Metrics) AddInterTokens(b *InterTokens) {
	if b.n == 0 {
		return
	}
	m.itl.add(b.counts[:], b.sum)
	*b = InterTokens{}
}

// batchHistogram is a Prometheus histogram that takes observations in
// batches (add). A scrape reads the buckets one by one: the count it
// reports is their total, so count and buckets always agree, while the sum
// may include a batch whose buckets the scrape missed (or the reverse).
type batchHistogram struct {
	desc    *prometheus.Desc
	bounds  []float64
	counts  []atomic.Uint64 // per bucket, the last +Inf
	sumBits atomic.Uint64   // math.Float64bits of the sum
}

func newBatchHistogram(name, help string, bounds []float64, labels prometheus.Labels) *batchHistogram {
	return &batchHistogram{
		desc:   prometheus.NewDesc(name, help, nil, labels),
		bounds: bounds,
		counts: make([]atomic.Uint64, len(bounds)+1),
	}
}

// observe records one value.
func (h *batchHistogram) observe(v float64) {
	h.counts[sort.SearchFloat64s(h.bounds, v)].Add(1)
	h.addSum(v)
}

// add records counts[i] values in bucket i, summing to sum.
func (h *batchHistogram) add(counts []uint32, sum float64) {
	for i, c := range counts {
		if c != 0 {
			h.counts[i].Add(uint64(c))
		}
	}
	h.addSum(sum)
}

func (h *batchHistogram) addSum(v float64) {
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (h *batchHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *batchHistogram) Collect(ch chan<- prometheus.Metric) {
	buckets := make(map[float64]uint64, len(h.bounds))
	var total uint64
	for i, b := range h.bounds {
		total += h.counts[i].Load()
		buckets[b] = total
	}
	total += h.counts[len(h.bounds)].Load()
	ch <- prometheus.MustNewConstHistogram(h.desc, total, math.Float64frombits(h.sumBits.Load()), buckets)
}
