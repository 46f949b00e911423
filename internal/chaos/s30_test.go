package chaos

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kvlease/kvlease/internal/chaos/netem"
	"github.com/kvlease/kvlease/internal/e2e"
)

// The S30 tests run the cluster across network namespaces and cut, slow or
// kill parts of it for real. Each checks outcomes only, from the outside:
// every answer equals a single engine's, P's release reasons are the ones
// the fault explains, and once the fault heals nothing stays held. They
// wait on conditions (P granted, the requests ended, P freed), never on
// the clock, so a loaded machine makes them slower, not wrong.

// load is a workload running in the background.
type load struct {
	tally Tally
	stop  context.CancelFunc
	done  chan error
}

func startLoad(t *testing.T, h *Harness, seed uint64, workers int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{stop: cancel, done: make(chan error, 1)}
	go func() { l.done <- h.Load(ctx, seed, workers, &l.tally) }()
	t.Cleanup(func() { l.finish(t) })
	return l
}

// finish stops sending and waits for the requests in flight.
func (l *load) finish(t *testing.T) {
	t.Helper()
	if l.stop == nil {
		return
	}
	l.stop()
	l.stop = nil
	must(t, <-l.done)
}

// answered waits until n more requests than now have been answered.
func (l *load) answered(t *testing.T, what string, n int) {
	t.Helper()
	_, from, _, _, _ := l.tally.Snapshot()
	e2e.WaitWithin(t, what, 5*time.Minute, func() bool {
		_, a, _, _, _ := l.tally.Snapshot()
		return a >= from+n
	})
}

// metricOf returns one engine's sum of a metric, -1 when unreachable.
func metricOf(h *Harness, name string, metric string, match ...string) float64 {
	for _, e := range h.Cluster.Engines() {
		if e.Name() == name {
			m, err := Scrape(context.Background(), e.URL)
			if err != nil {
				return -1
			}
			return m.Sum(metric, match...)
		}
	}
	panic("no engine " + name)
}

// async sends n requests at once and returns a wait for their tally.
func async(h *Harness, n int, stream bool) (*Tally, func(t *testing.T)) {
	var tally Tally
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			res, err := h.Do(context.Background(), Request{Prompt: i % len(prompts), Seed: i % 3, Stream: stream != (i%2 == 1)})
			if err != nil {
				errs <- err
				return
			}
			tally.Add(res)
		})
	}
	return &tally, func(t *testing.T) {
		t.Helper()
		wg.Wait()
		close(errs)
		must(t, <-errs)
	}
}

// warm sends one request and waits for it: D has a session with P.
func warm(t *testing.T, h *Harness) {
	t.Helper()
	tally, wait := async(h, 1, false)
	wait(t)
	checkAnswers(t, tally)
}

// TestHarnessNoFault: across namespaces, with no fault, every answer
// equals the single engine's and every lease ends read.
func TestHarnessNoFault(t *testing.T) {
	h := start(t, Options{})
	tally, wait := async(h, 6, true)
	wait(t)
	checkAnswers(t, tally)
	settle(t, h)
	if got := released(t, h, "read_done"); got["read_done"] != 6 {
		t.Errorf("read_done = %v, want 6", got["read_done"])
	}
}

// TestS30PartitionLongerThanLease (S12 for real): P and D cannot reach
// each other, silently, while requests are granted leases on P. P frees
// them as expired (or peer_lost), D falls back to recompute, every client
// still gets the single engine's answer; after the partition heals the
// pull works again and nothing stays held. The claim deadline is off
// (--kv-claim-timeout 0s): with it, P frees a lease whose claim the
// partition dropped as unclaimed after lease/6 instead (the random runs
// of kvlease chaos keep it on).
func TestS30PartitionLongerThanLease(t *testing.T) {
	h := start(t, Options{Lease: 3 * time.Second, ExtraServeArgs: noClaimDeadline})
	ctx := context.Background()
	P, D := h.Node("prefill0"), h.Node("decode0")
	warm(t, h)
	w := h.WatchReleases(100 * time.Millisecond)
	defer w.Stop()

	must(t, h.Net.Partition(ctx, P, D))
	cut := time.Now()
	const n = 4
	tally, wait := async(h, n, true)
	// Hold the partition until D fell back on every request and P freed
	// every lease it granted during it: both need more than the lease.
	wait(t)
	e2e.WaitWithin(t, "P to free the partitioned leases", 3*h.Lease()+time.Minute, func() bool {
		r, err := h.Released(ctx)
		return err == nil && r["expired"]+r["peer_lost"] >= n
	})
	held := time.Since(cut)
	must(t, h.Net.Heal(ctx, P))
	must(t, h.Net.Heal(ctx, D))
	if d, ok := w.FirstAfter(cut, "expired", "peer_lost"); ok {
		t.Logf("partition held %v; first release %v after the cut (lease %v, grace %v)", held, d, h.Lease(), h.Lease()/15)
	}
	checkAnswers(t, tally)
	fb, err := h.Fallbacks(ctx)
	must(t, err)
	t.Logf("D's fallbacks: %v", nonZero(fb))
	if total(fb) < n {
		t.Errorf("D fell back %v times for %d requests that could not pull", total(fb), n)
	}

	before, err := h.Released(ctx)
	must(t, err)
	warm(t, h) // healed: the pull works again
	settle(t, h)
	got := released(t, h, "read_done", "expired", "peer_lost")
	if got["read_done"] <= before["read_done"] {
		t.Errorf("after the partition healed, no lease ended read: %v", nonZero(got))
	}
}

// noClaimDeadline turns P's claim deadline (S25) off.
var noClaimDeadline = []string{"--kv-claim-timeout", "0s"}

func total(m map[string]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

// TestS30PartitionShorterThanGrace (S13 for real): P and D are cut apart
// from before P grants a lease until just after; the pull then goes
// through (TCP retransmits what the cut dropped), nothing is freed but by
// the read, and D never falls back.
func TestS30PartitionShorterThanGrace(t *testing.T) {
	// A 15 s lease: heartbeat 2.5 s, peer grace 1 s; the cut lasts the
	// time P takes to grant, well under it on an idle machine.
	h := start(t, Options{Lease: 15 * time.Second})
	ctx := context.Background()
	P, D := h.Node("prefill0"), h.Node("decode0")
	warm(t, h)
	const rounds = 3
	for i := range rounds {
		granted := metricOf(h, "prefill0", "kvlease_leases_granted_total")
		must(t, h.Net.Partition(ctx, P, D))
		cut := time.Now()
		tally, wait := async(h, 1, i%2 == 0)
		e2e.WaitWithin(t, "P to grant the lease", time.Minute, func() bool {
			return metricOf(h, "prefill0", "kvlease_leases_granted_total") > granted
		})
		must(t, h.Net.Heal(ctx, P))
		must(t, h.Net.Heal(ctx, D))
		t.Logf("round %d: cut for %v (peer grace %v)", i, time.Since(cut), h.Lease()/15)
		wait(t)
		checkAnswers(t, tally)
	}
	settle(t, h)
	got := released(t, h, "read_done")
	if got["read_done"] != rounds+1 {
		t.Errorf("read_done = %v, want %d", got["read_done"], rounds+1)
	}
	fb, err := h.Fallbacks(ctx)
	must(t, err)
	if total(fb) != 0 {
		t.Errorf("D fell back: %v", nonZero(fb))
	}
}

// TestS30LossyPrefillLink: 20% of the packets between P and the other
// nodes are lost and the rest delayed by 0 to 100 ms (50 ms ± 50 ms, so
// they also overtake each other), both ways, by the userspace netem,
// while clients keep four requests in flight (one stream in ten hung up
// after its first token, as the load does everywhere): every answer
// equals the single engine's and nothing leaks.
func TestS30LossyPrefillLink(t *testing.T) {
	needNetem(t)
	h := start(t, Options{Lease: 3 * time.Second, Seed: 1})
	ctx := context.Background()
	P := h.Node("prefill0")
	warm(t, h)
	must(t, h.Net.Impair(ctx, P, netem.Fault{Delay: 50 * time.Millisecond, Jitter: 50 * time.Millisecond, Loss: 0.2}))
	l := startLoad(t, h, 1, 4)
	l.answered(t, "12 answers through the lossy link", 12)
	l.finish(t)
	must(t, h.Net.Heal(ctx, P))
	s := h.Net.NetemStats()
	t.Logf("netem on P's link: %+v", s)
	if s.Lost == 0 || s.Delivered == 0 {
		t.Error("no packet lost or delivered on P's link: the fault did not act")
	}
	// TCP carries every byte through the loss; only a leg that gives up
	// (a proxy timeout or a scrape marking P down) may fail a request.
	checkAnswers(t, &l.tally, "HTTP 502", "HTTP 503", "HTTP 504")
	settle(t, h)
	released(t, h, "read_done", "expired", "peer_lost", "fallback", "unclaimed", "aborted")
}

// TestS30ReorderDuplicateCorruptPrefillLink: P's packets are delayed by
// 10 ms ± 10 ms, a quarter of them sent at once ahead of the others, one
// in ten duplicated and one in twenty with a bit flipped, under load.
// Every answer equals the single engine's: the kernels' TCP drops each
// corrupted segment by its checksum (counted) and retransmits it, and
// reorders and deduplicates the rest; nothing leaks.
func TestS30ReorderDuplicateCorruptPrefillLink(t *testing.T) {
	needNetem(t)
	h := start(t, Options{Lease: 3 * time.Second, Seed: 2})
	ctx := context.Background()
	P := h.Node("prefill0")
	warm(t, h)
	must(t, h.Net.Impair(ctx, P, netem.Fault{Delay: 10 * time.Millisecond, Jitter: 10 * time.Millisecond,
		Reorder: 0.25, Duplicate: 0.1, Corrupt: 0.05}))
	l := startLoad(t, h, 4, 4)
	l.answered(t, "12 answers through the reordering, duplicating, corrupting link", 12)
	l.finish(t)
	must(t, h.Net.Heal(ctx, P))
	s := h.Net.NetemStats()
	hdr, tcp, err := h.Net.ChecksumErrors(ctx)
	must(t, err)
	t.Logf("netem on P's link: %+v; caught by checksums: %d IP headers, %d TCP segments", s, hdr, tcp)
	if s.Reordered == 0 || s.Duplicated == 0 || s.Corrupted == 0 {
		t.Errorf("a fault did not act: %+v", s)
	}
	if hdr+tcp == 0 {
		t.Error("no corrupted packet was caught by a checksum")
	}
	checkAnswers(t, &l.tally, "HTTP 502", "HTTP 503", "HTTP 504")
	settle(t, h)
	released(t, h, "read_done", "expired", "peer_lost", "fallback", "unclaimed", "aborted")
}

// TestS30OneWayPartition: what P sends to D is dropped, what D sends to P
// arrives (D's RENEWs reach P, P's data never reaches D). D falls back,
// every answer is right, and every lease ends.
func TestS30OneWayPartition(t *testing.T) {
	h := start(t, Options{Lease: 3 * time.Second})
	ctx := context.Background()
	P, D := h.Node("prefill0"), h.Node("decode0")
	warm(t, h)
	must(t, h.Net.Cut(ctx, P, D))
	const n = 4
	tally, wait := async(h, n, false)
	wait(t)
	e2e.WaitWithin(t, "P to end the leases granted during the cut", 3*h.Lease()+time.Minute, func() bool {
		return metricOf(h, "prefill0", "kvlease_leases_active") == 0
	})
	must(t, h.Net.Heal(ctx, P))
	checkAnswers(t, tally)
	fb, err := h.Fallbacks(ctx)
	must(t, err)
	t.Logf("D's fallbacks: %v", nonZero(fb))
	warm(t, h)
	settle(t, h)
	got := released(t, h, "read_done", "expired", "peer_lost", "fallback", "unclaimed")
	if other := got["expired"] + got["peer_lost"] + got["fallback"] + got["unclaimed"]; other < n {
		t.Errorf("%d leases granted during the cut, %v ended otherwise than read", n, other)
	}
}

// TestS30KillDecodeUnderLoad (S10 for real): decode0 is killed with -9
// under load while it holds leases it could not pull yet (what P sends it
// is dropped; what it sends P arrives, so its session with P is bound).
// P frees those leases: aborted when the proxy, seeing the decode leg die,
// aborts the request on P first; peer_lost when the dead process's RST
// ends a session they are bound to; expired for those whose READ decode0
// never got out (with no ACKs from P, its TCP stops sending: a one-way
// cut stalls both ways at the TCP level). The proxy sends the rest to
// decode1; decode0 restarts and serves again.
func TestS30KillDecodeUnderLoad(t *testing.T) {
	h := start(t, Options{Lease: 3 * time.Second, Decode: 2})
	ctx := context.Background()
	P, D := h.Node("prefill0"), h.Node("decode0")
	warm(t, h)
	must(t, h.Net.Cut(ctx, P, D))
	l := startLoad(t, h, 2, 4)
	e2e.WaitWithin(t, "decode0 to admit a request it cannot pull", 2*time.Minute, func() bool {
		return metricOf(h, "prefill0", "kvlease_leases_active") > 0 &&
			metricOf(h, "decode0", "vllm:num_requests_waiting")+metricOf(h, "decode0", "vllm:num_requests_running") > 0
	})
	must(t, h.Cluster.Kill(h.Index("decode0")))
	killed := time.Now()
	w := h.WatchReleases(50 * time.Millisecond)
	defer w.Stop()
	l.answered(t, "answers after decode0 died", 6)
	must(t, h.Net.Heal(ctx, P))
	must(t, h.Cluster.Restart(ctx, h.Index("decode0")))
	e2e.WaitWithin(t, "the restarted decode0 to serve", 5*time.Minute, func() bool {
		return metricOf(h, "decode0", "vllm:request_success_total") > 0
	})
	l.finish(t)
	if d, ok := w.FirstAfter(killed, "peer_lost", "expired"); ok {
		t.Logf("P freed a lease of the dead decode0 %v after the kill (grace %v, lease %v)", d, h.Lease()/15, h.Lease())
	}
	// Requests decode0 had when it died fail; nothing else may.
	checkAnswers(t, &l.tally, "HTTP 502", "HTTP 503", "stream cut", "connection")
	settle(t, h)
	got := released(t, h, "read_done", "peer_lost", "expired", "unclaimed", "aborted")
	if got["peer_lost"]+got["expired"]+got["aborted"]+got["unclaimed"] < 1 {
		t.Errorf("decode0 died holding unpulled leases, yet P freed none otherwise than read: %v", nonZero(got))
	}
}

// TestS30PausePrefillLongerThanLease: P is stopped (SIGSTOP) with leases
// outstanding for longer than the lease, its sockets open and silent. D
// falls back on its own clock; once P runs again it frees every one of
// them and serves new requests. The claim deadline is off, so that the
// leases granted while D could not claim them are still there at the
// pause.
func TestS30PausePrefillLongerThanLease(t *testing.T) {
	h := start(t, Options{Lease: 3 * time.Second, ExtraServeArgs: noClaimDeadline})
	ctx := context.Background()
	P, D := h.Node("prefill0"), h.Node("decode0")
	warm(t, h)
	// Leases outstanding at the pause: granted while D cannot pull.
	granted := metricOf(h, "prefill0", "kvlease_leases_granted_total")
	must(t, h.Net.Partition(ctx, P, D))
	const n = 3
	tally, wait := async(h, n, true)
	e2e.WaitWithin(t, "P to grant the leases", time.Minute, func() bool {
		return metricOf(h, "prefill0", "kvlease_leases_granted_total") >= granted+n
	})
	must(t, h.Cluster.Pause(h.Index("prefill0")))
	paused := time.Now()
	must(t, h.Net.Heal(ctx, P))
	must(t, h.Net.Heal(ctx, D))
	wait(t) // D falls back on every request while P is stopped
	t.Logf("P stopped for %v so far (lease %v)", time.Since(paused), h.Lease())
	must(t, h.Cluster.Resume(h.Index("prefill0")))
	checkAnswers(t, tally)
	warm(t, h)
	settle(t, h)
	got := released(t, h, "read_done", "expired", "fallback", "peer_lost", "unclaimed")
	if other := got["expired"] + got["fallback"] + got["peer_lost"] + got["unclaimed"]; other < n {
		t.Errorf("%d leases outstanding across the pause, %v ended otherwise than read", n, other)
	}
}

// TestS30ProxyKilledMidStream: the proxy dies (kill -9) with streams in
// flight; their clients see the stream cut, the engines see their
// connections drop and abort. The proxy restarts, serves again, and no
// engine holds anything afterwards.
func TestS30ProxyKilledMidStream(t *testing.T) {
	h := start(t, Options{Lease: 3 * time.Second})
	warm(t, h)
	l := startLoad(t, h, 3, 4)
	e2e.WaitWithin(t, "decode0 to stream a request", time.Minute, func() bool {
		return metricOf(h, "decode0", "vllm:num_requests_running") > 0
	})
	must(t, h.Cluster.Kill(h.Cluster.ProxyIndex()))
	must(t, h.Cluster.Restart(context.Background(), h.Cluster.ProxyIndex()))
	l.answered(t, "answers through the restarted proxy", 6)
	l.finish(t)
	checkAnswers(t, &l.tally, "stream cut", "connection")
	_, _, _, errs, _ := l.tally.Snapshot()
	if errs["stream cut"]+errs["connection"] == 0 {
		t.Error("no request was cut by the proxy's death: the fault missed the load")
	}
	settle(t, h)
	released(t, h, "read_done", "aborted", "undelivered", "unclaimed", "expired", "peer_lost")
}
