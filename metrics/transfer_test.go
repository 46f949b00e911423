package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/transport/tcp"
	"github.com/kvlease/kvlease/wire"
	"github.com/kvlease/kvlease/xfer"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func TestScrapeExportsTransferMetrics(t *testing.T) {
	src := fixed(engine.NodeStats{
		Producer: &xfer.ProducerStats{
			Granted: 9, Refused: 1, Active: 2,
			Released:         map[wire.Reason]uint64{wire.ReasonReadDone: 4, wire.ReasonUndelivered: 2, wire.ReasonRejected: 1},
			BlockSecondsRead: 12.5, BlockSecondsUnread: 3,
			ReadsServed: 4, ReadsRefused: 1, BytesServed: 4096,
		},
		Consumer: &xfer.ConsumerStats{
			Bytes: 2048, PulledBlocks: 3, HitBlocks: 1, Waiting: 5, Reading: 1,
			Fallbacks:    map[xfer.FallbackReason]uint64{xfer.FallbackUnreachable: 2},
			Failures:     map[xfer.FailureKind]uint64{xfer.FailureTimeout: 1, xfer.FailureReadBusy: 7},
			ReleasesSent: map[wire.Reason]uint64{wire.ReasonRejected: 6},
		},
	})
	m := New("m", src)
	m.ObserveTransfer(3 * time.Millisecond)
	text := scrape(t, m)
	for _, want := range []string{
		`kvlease_leases_active{model_name="m"} 2`,
		`kvlease_leases_granted_total{model_name="m"} 9`,
		`kvlease_leases_refused_total{model_name="m"} 1`,
		`kvlease_leases_released_total{model_name="m",reason="read_done"} 4`,
		`kvlease_leases_released_total{model_name="m",reason="undelivered"} 2`,
		`kvlease_leases_released_total{model_name="m",reason="rejected"} 1`,
		`kvlease_leases_released_total{model_name="m",reason="peer_lost"} 0`,
		`kvlease_leases_released_total{model_name="m",reason="expired"} 0`,
		`kvlease_lease_block_seconds_total{model_name="m",outcome="read"} 12.5`,
		`kvlease_lease_block_seconds_total{model_name="m",outcome="unread"} 3`,
		`kvlease_transfer_bytes_total{direction="out",model_name="m"} 4096`,
		`kvlease_transfer_bytes_total{direction="in",model_name="m"} 2048`,
		`kvlease_transfer_blocks_total{model_name="m",source="pulled"} 3`,
		`kvlease_transfer_failures_total{kind="timeout",model_name="m"} 1`,
		`kvlease_transfer_failures_total{kind="corrupt",model_name="m"} 0`,
		`kvlease_transfer_failures_total{kind="read_busy",model_name="m"} 7`,
		`kvlease_transfer_failures_total{kind="unauthenticated",model_name="m"} 0`,
		`kvlease_remote_prefill_fallbacks_total{model_name="m",reason="read_internal"} 0`,
		`kvlease_remote_prefill_fallbacks_total{model_name="m",reason="unreachable"} 2`,
		`kvlease_remote_prefill_requests{model_name="m",state="waiting"} 5`,
		`kvlease_releases_sent_total{model_name="m",reason="rejected"} 6`,
		`kvlease_transfer_seconds_bucket{model_name="m",le="0.005"} 1`,
		`kvlease_transfer_seconds_bucket{model_name="m",le="0.0025"} 0`,
		`# TYPE kvlease_leases_active gauge`,
		`# TYPE kvlease_leases_released_total counter`,
		`# TYPE kvlease_transfer_seconds histogram`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

// A source without transfer counters (a single engine) still exports every
// transfer series, as zeros.
func TestTransferMetricsAreZeroWithoutTransfer(t *testing.T) {
	text := scrape(t, New("m", fixed(engine.NodeStats{})))
	for _, want := range []string{
		`kvlease_leases_active{model_name="m"} 0`,
		`kvlease_leases_released_total{model_name="m",reason="aborted"} 0`,
		`kvlease_transfer_bytes_total{direction="in",model_name="m"} 0`,
		`kvlease_remote_prefill_fallbacks_total{model_name="m",reason="lease_gone"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

// Each reason-labelled series exports exactly the values its enum defines,
// from the start: none missing (a dashboard sees a zero, not a gap), none
// that nothing produces.
func TestTransferMetricsExportExactlyTheReasons(t *testing.T) {
	text := scrape(t, New("m", fixed(engine.NodeStats{})))
	labels := func(metric, label string) []string {
		re := regexp.MustCompile(`(?m)^` + metric + `\{[^}]*` + label + `="([a-z_]+)"[^}]*\} `)
		var out []string
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			out = append(out, m[1])
		}
		slices.Sort(out)
		return out
	}
	names := func(xs ...fmt.Stringer) []string {
		var out []string
		for _, x := range xs {
			out = append(out, x.String())
		}
		slices.Sort(out)
		return out
	}
	var released, sent, fallbacks, failures []fmt.Stringer
	for r := range wire.Reason(255) { // every defined reason, gaps skipped
		if r.Valid() {
			released = append(released, r)
		}
	}
	for _, r := range xfer.ReleaseReasonsSent() {
		sent = append(sent, r)
	}
	for _, r := range xfer.FallbackReasons() {
		fallbacks = append(fallbacks, r)
	}
	for _, k := range xfer.FailureKinds() {
		failures = append(failures, k)
	}
	for _, tc := range []struct {
		metric, label string
		want          []string
	}{
		{"kvlease_leases_released_total", "reason", names(released...)},
		{"kvlease_releases_sent_total", "reason", names(sent...)},
		{"kvlease_remote_prefill_fallbacks_total", "reason", names(fallbacks...)},
		{"kvlease_transfer_failures_total", "kind", names(failures...)},
	} {
		if got := labels(tc.metric, tc.label); !slices.Equal(got, tc.want) || len(got) == 0 {
			t.Errorf("%s{%s}: %q, want %q", tc.metric, tc.label, got, tc.want)
		}
	}
	if strings.Contains(text, `"restart"`) {
		t.Error(`a release reason "restart" is exported; nothing produces it`)
	}
}

type fixedTransport tcp.Stats

func (f fixedTransport) Stats() tcp.Stats { return tcp.Stats(f) }

func TestScrapeExportsTransportBounds(t *testing.T) {
	m := New("m", fixed(engine.NodeStats{Consumer: &xfer.ConsumerStats{PeersFailing: map[xfer.FailureKind]uint64{xfer.FailureUnauthenticated: 2}}}))
	m.AddTransport(fixedTransport{
		Authenticated: 3, Unauthenticated: 7, ReceiveBytes: 4096, ReceiveLimit: 1 << 20, ReceiveWaits: 2,
		Dropped:           map[string]uint64{tcp.DropSlowFrame: 5},
		HandshakeFailures: map[tcp.HandshakeFailure]uint64{{Side: "accepted", Reason: "refused"}: 4},
	})
	text := scrape(t, m)
	for _, want := range []string{
		`kvlease_transfer_connections{model_name="m",state="authenticated"} 3`,
		`kvlease_transfer_connections{model_name="m",state="unauthenticated"} 7`,
		`kvlease_transfer_connections_dropped_total{model_name="m",reason="slow_frame"} 5`,
		`kvlease_transfer_connections_dropped_total{model_name="m",reason="handshake_timeout"} 0`,
		`kvlease_transfer_handshake_failures_total{model_name="m",reason="refused",side="accepted"} 4`,
		`kvlease_transfer_handshake_failures_total{model_name="m",reason="timeout",side="dialed"} 0`,
		`kvlease_transfer_receive_buffer_bytes{model_name="m"} 4096`,
		`kvlease_transfer_receive_buffer_limit_bytes{model_name="m"} 1.048576e+06`,
		`kvlease_transfer_receive_waits_total{model_name="m"} 2`,
		`kvlease_transfer_peers_failing{model_name="m",reason="unauthenticated"} 2`,
		`kvlease_transfer_peers_failing{model_name="m",reason="handshake_timeout"} 0`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing %s", want)
		}
	}
}
