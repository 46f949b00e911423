package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kvlease/kvlease/internal/promtext"
)

// LeaseFigures are the KV-block and lease figures of a set of kvlease
// engines, read from their /metrics and summed over them. Counters are
// since each engine started: a restarted engine starts again from zero
// (the fault scenarios restart decode engines only, and the lease
// counters are the prefill engines').
type LeaseFigures struct {
	// HeldBlocks is kvlease_kv_blocks{state="held"}: blocks some request,
	// lease or transfer holds. Once nothing runs and no lease is left it
	// must be 0; anything else is a leak.
	HeldBlocks float64 `json:"held_blocks"`
	// LeasesActive is kvlease_leases_active.
	LeasesActive float64 `json:"leases_active"`
	// Granted is kvlease_leases_granted_total.
	Granted float64 `json:"leases_granted"`
	// Released is kvlease_leases_released_total by reason (read_done,
	// rejected, aborted, undelivered, peer_lost, expired, ...).
	Released map[string]float64 `json:"leases_released"`
	// BlockSecondsRead and BlockSecondsUnread are
	// kvlease_lease_block_seconds_total by outcome: the block-seconds held
	// by released leases that were read, and by those nobody read (the
	// stranded memory). A lease counts when it is released.
	BlockSecondsRead   float64 `json:"lease_block_seconds_read"`
	BlockSecondsUnread float64 `json:"lease_block_seconds_unread"`
	// Fallbacks is kvlease_remote_prefill_fallbacks_total over reasons:
	// decode-side requests that could not have their remote prefix.
	Fallbacks float64 `json:"remote_prefill_fallbacks"`
	// Unreachable lists the endpoints that could not be scraped; their
	// figures are missing from the sums.
	Unreachable []string `json:"unreachable,omitempty"`
}

// Settled reports whether no block is held and no lease is active on any
// endpoint, and every endpoint answered.
func (f LeaseFigures) Settled() bool {
	return f.HeldBlocks == 0 && f.LeasesActive == 0 && len(f.Unreachable) == 0
}

// add sums o into f.
func (f *LeaseFigures) add(o LeaseFigures) {
	f.HeldBlocks += o.HeldBlocks
	f.LeasesActive += o.LeasesActive
	f.Granted += o.Granted
	f.BlockSecondsRead += o.BlockSecondsRead
	f.BlockSecondsUnread += o.BlockSecondsUnread
	f.Fallbacks += o.Fallbacks
	for k, v := range o.Released {
		if f.Released == nil {
			f.Released = map[string]float64{}
		}
		f.Released[k] += v
	}
	f.Unreachable = append(f.Unreachable, o.Unreachable...)
}

// ReleasedText formats the non-zero release counts, sorted by reason:
// "aborted 3, read_done 120", or "none".
func (f LeaseFigures) ReleasedText() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f.Released)) {
		if v := f.Released[k]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// leaseMetrics are the metrics parseLeaseFigures reads.
var leaseMetrics = []string{"kvlease_kv_blocks", "kvlease_leases_active", "kvlease_leases_granted_total",
	"kvlease_leases_released_total", "kvlease_lease_block_seconds_total", "kvlease_remote_prefill_fallbacks_total"}

// parseLeaseFigures reads one endpoint's Prometheus text. Lines it cannot
// parse are skipped, as in parseMetrics.
func parseLeaseFigures(r io.Reader) (LeaseFigures, error) {
	var f LeaseFigures
	err := promtext.Each(r, leaseMetrics, func(name string, labels map[string]string, v float64) {
		switch name {
		case "kvlease_kv_blocks":
			if labels["state"] == "held" {
				f.HeldBlocks += v
			}
		case "kvlease_leases_active":
			f.LeasesActive += v
		case "kvlease_leases_granted_total":
			f.Granted += v
		case "kvlease_leases_released_total":
			if f.Released == nil {
				f.Released = map[string]float64{}
			}
			f.Released[labels["reason"]] += v
		case "kvlease_lease_block_seconds_total":
			switch labels["outcome"] {
			case "read":
				f.BlockSecondsRead += v
			case "unread":
				f.BlockSecondsUnread += v
			}
		case "kvlease_remote_prefill_fallbacks_total":
			f.Fallbacks += v
		}
	})
	return f, err
}

// ScrapeLeases reads the lease figures of every endpoint in urls (a URL
// without a path gets /metrics) in parallel, each within timeout, and
// sums them. An endpoint that does not answer is listed in Unreachable.
func ScrapeLeases(ctx context.Context, client *http.Client, urls []string, timeout time.Duration) LeaseFigures {
	if client == nil {
		client = http.DefaultClient
	}
	figs := make([]LeaseFigures, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			u = metricsURL(u)
			f, err := scrapeLeases(ctx, client, u, timeout)
			if err != nil {
				f = LeaseFigures{Unreachable: []string{u}}
			}
			figs[i] = f
		})
	}
	wg.Wait()
	var sum LeaseFigures
	for _, f := range figs {
		sum.add(f)
	}
	return sum
}

func scrapeLeases(ctx context.Context, client *http.Client, u string, timeout time.Duration) (LeaseFigures, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return LeaseFigures{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return LeaseFigures{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return LeaseFigures{}, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return parseLeaseFigures(io.LimitReader(resp.Body, maxScrapeBytes))
}
