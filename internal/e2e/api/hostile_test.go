package api

import (
	"context"
	be "encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/internal/e2e"
	"github.com/kvlease/kvlease/wire"
)

// transferAddr is P's transfer address as kv_transfer_params name it.
func transferAddr(t *testing.T, kv json.RawMessage) string {
	t.Helper()
	var p struct {
		Host string `json:"remote_host"`
		Port int    `json:"remote_port"`
	}
	if err := json.Unmarshal(kv, &p); err != nil || p.Port == 0 {
		t.Fatalf("kv_transfer_params %s: %v", kv, err)
	}
	return net.JoinHostPort(p.Host, strconv.Itoa(p.Port))
}

// heapInUse is the test process's live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// floodHeapBound is the most the flood may add to the process's live heap
// (P's buffers for the attackers' connections, and the attackers' own):
// before the transfer port was bounded, each of these connections made P
// buffer up to a megabyte as soon as its bytes trickled in (1.2 GiB of
// RSS for twelve of them).
const floodHeapBound = 32 << 20

// TestUnauthenticatedFlood is S27: many unauthenticated connections (800
// at a time) from 20 source addresses, announce the largest frames (64 MiB) or a
// handshake-sized one and trickle it a byte at a time, and keep
// reconnecting. P's heap stays within floodHeapBound, the connections are
// dropped (length cap, source and total bounds, handshake deadline, slow
// frames), memory returns when they go, and a real decode engine still
// pulls afterwards.
func TestUnauthenticatedFlood(t *testing.T) {
	c := pdCluster{
		p: startEngine(t, engineOpts{role: engine.RolePrefill}),
		d: startEngine(t, engineOpts{role: engine.RoleDecode}),
	}
	addr := transferAddr(t, c.prefill(t, "flood-0"))
	base := heapInUse()

	// 800 connections at a time, 40 per source: half trickle a
	// handshake-sized frame (400 of them, over both bounds), half announce
	// 64 MiB.
	const sources, perSource = 20, 40
	stop := make(chan struct{})
	var wg sync.WaitGroup
	attack := func(src string, huge bool) {
		defer wg.Done()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: time.Second}
		for {
			select {
			case <-stop:
				return
			default:
			}
			conn, err := d.Dial("tcp", addr)
			if err != nil {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
			var hdr [5]byte
			n := uint32(wire.MaxFrameBytes)
			if !huge {
				n = wire.MaxHandshakePayloadBytes
			}
			be.BigEndian.PutUint32(hdr[:4], n)
			hdr[4] = byte(wire.MsgHello)
			_, err = conn.Write(hdr[:])
			for err == nil {
				select {
				case <-stop:
					conn.Close()
					return
				case <-time.After(100 * time.Millisecond):
				}
				_, err = conn.Write([]byte{0x55})
			}
			conn.Close()
		}
	}
	for i := range sources {
		src := fmt.Sprintf("127.0.0.%d", 2+i)
		for j := range perSource {
			wg.Add(1)
			go attack(src, j%2 == 0)
		}
	}
	var peak uint64
	unauth := 0
	deadline := time.Now().Add(time.Minute)
	for unauth < c.p.tr.Config().MaxUnauthenticated {
		if time.Now().After(deadline) {
			t.Fatalf("the flood never filled P's unauthenticated set: %d of %d", unauth, c.p.tr.Config().MaxUnauthenticated)
		}
		peak = max(peak, heapInUse())
		unauth = max(unauth, c.p.tr.Stats().Unauthenticated)
		time.Sleep(20 * time.Millisecond)
	}
	for range 10 { // keep measuring while the flood goes on
		peak = max(peak, heapInUse())
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	st := c.p.tr.Stats()
	t.Logf("heap before %d KiB, peak %d KiB (bound +%d KiB); unauthenticated at most %d; dropped %v",
		base>>10, peak>>10, floodHeapBound>>10, unauth, st.Dropped)
	if peak > base+floodHeapBound {
		t.Errorf("heap grew from %d to %d bytes under the flood, bound %d", base, peak, floodHeapBound)
	}
	if unauth > c.p.tr.Config().MaxUnauthenticated {
		t.Errorf("%d unauthenticated connections at once, bound %d", unauth, c.p.tr.Config().MaxUnauthenticated)
	}
	if st.Dropped["frame_too_large"] == 0 || st.Dropped["too_many_unauthenticated"]+st.Dropped["too_many_from_source"] == 0 {
		t.Errorf("dropped %v", st.Dropped)
	}
	e2e.WaitFor(t, "the flood's connections to go", func() bool { return c.p.tr.Stats().Unauthenticated == 0 })

	// A real decode engine still pulls (no fallback, the prefix comes
	// from P), a fresh lease: the flood may last longer than one under the
	// race detector.
	kv := c.prefill(t, "flood-1")
	p := completion(pdPrompt, 8)
	dc := c.d.client(option.WithHeader("X-Request-Id", "flood-1"))
	got, err := dc.Completions.New(context.Background(), p, option.WithJSONSet("kv_transfer_params", kv))
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage.PromptTokensDetails.CachedTokens != int64(len(pdPrompt)) {
		t.Errorf("decode cached_tokens %d, want the pulled prompt %d", got.Usage.PromptTokensDetails.CachedTokens, len(pdPrompt))
	}
	if n := c.d.metric(t, `kvlease_transfer_blocks_total{model_name="`+modelName+`",source="pulled"}`); n <= 0 {
		t.Errorf("D pulled %v blocks", n)
	}
	if after := heapInUse(); after > base+floodHeapBound/4 {
		t.Errorf("heap %d bytes after the flood, %d before: memory did not return", after, base)
	}
}

// TestWrongEndpointFallsBack is S28: kv_transfer_params whose
// remote_port is not a prefill engine's transfer port — an HTTP port, a
// listener that accepts and says nothing, a stand-in for a SIGSTOPped P
// (the kernel completes the connection, nobody reads) — make the decode
// engine fall back (recompute) after a few failed handshakes, with the
// default 30 s lease; the reason is in /metrics.
func TestWrongEndpointFallsBack(t *testing.T) {
	c := pdCluster{
		p: startEngine(t, engineOpts{role: engine.RolePrefill}),
		d: startEngine(t, engineOpts{role: engine.RoleDecode}),
	}
	// A listener that accepts and never says anything.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	// A stopped P: the kernel accepts into the backlog, nobody reads.
	stopped, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stopped.Close()
	httpHost, httpPort, _ := net.SplitHostPort(c.d.url[len("http://"):])

	for i, tc := range []struct {
		name string
		addr string
		// reasons the fallback may have: an HTTP server answers a HELLO
		// only if it happens to contain a line break, else it waits.
		reasons []string
	}{
		{"http port", net.JoinHostPort(httpHost, httpPort), []string{"handshake_timeout", "handshake_closed"}},
		{"silent listener", silent.Addr().String(), []string{"handshake_timeout"}},
		{"stopped prefill engine", stopped.Addr().String(), []string{"handshake_timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "wrong-" + strconv.Itoa(i)
			var kv map[string]any
			json.Unmarshal(c.prefill(t, id), &kv)
			host, port, _ := net.SplitHostPort(tc.addr)
			kv["remote_host"] = host
			kv["remote_port"], _ = strconv.Atoi(port)
			if ms, _ := kv["lease_expires_in_ms"].(float64); ms < 29000 {
				t.Fatalf("lease %v, want the default 30 s", kv["lease_expires_in_ms"])
			}
			before := map[string]float64{}
			for _, r := range tc.reasons {
				before[r] = c.d.metric(t, `kvlease_remote_prefill_fallbacks_total{model_name="`+modelName+`",reason="`+r+`"}`)
			}
			dc := c.d.client(option.WithHeader("X-Request-Id", id))
			got, err := dc.Completions.New(context.Background(), completion(pdPrompt, 4), option.WithJSONSet("kv_transfer_params", kv))
			if err != nil {
				t.Fatal(err)
			}
			// The answer came (recomputed: D's own cache may hold the
			// prompt from an earlier subtest, never P's blocks).
			if got.Usage.CompletionTokens == 0 {
				t.Errorf("usage %+v", got.Usage)
			}
			fell := ""
			for _, r := range tc.reasons {
				if c.d.metric(t, `kvlease_remote_prefill_fallbacks_total{model_name="`+modelName+`",reason="`+r+`"}`) == before[r]+1 {
					fell = r
				}
			}
			if fell == "" {
				t.Errorf("no fallback counted with reason %v", tc.reasons)
			}
			if n := c.d.metric(t, `kvlease_transfer_peers_failing{model_name="`+modelName+`",reason="`+fell+`"}`); n < 1 {
				t.Errorf("kvlease_transfer_peers_failing{reason=%q} = %v", fell, n)
			}
		})
	}
}

// TestStoppedPrefillEngineFallsBack is S28 with a real prefill engine
// process stopped by SIGSTOP after it granted the lease: its kernel still
// completes connections, nothing answers. The decode engine answers by
// recomputing, with the default 30 s lease, the fallback counted as
// handshake_timeout.
func TestStoppedPrefillEngineFallsBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sees that P stopped in /proc/PID/stat (Linux)")
	}
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	pe := serve(t, "--role", "prefill", "--transfer-port", "0", "--profile", "tiny", "--model", modelName,
		"--cluster-secret-file", secretFile, "--log-level", "warn")
	d := startEngine(t, engineOpts{role: engine.RoleDecode})
	status, m := e2e.PostJSON(t, pe.URL+"/v1/completions", `{"model":"`+modelName+`","prompt":"`+pdPrompt+`","max_tokens":1,`+
		`"kv_transfer_params":{"do_remote_decode":true}}`, "X-Request-Id", "stopped-1")
	if status != 200 || m["kv_transfer_params"] == nil {
		t.Fatalf("prefill %d %v", status, m)
	}
	kv := m["kv_transfer_params"].(map[string]any)
	if ms, _ := kv["lease_expires_in_ms"].(float64); ms < 29000 {
		t.Fatalf("lease %v, want the default 30 s", kv["lease_expires_in_ms"])
	}
	pid := pe.Cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	// Every thread of P stops before the decode leg is sent: until then
	// a thread that was on its way may still answer.
	e2e.WaitFor(t, "P to be stopped", func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		_, after, _ := strings.Cut(string(b), ") ")
		return strings.HasPrefix(after, "T")
	})
	dc := d.client(option.WithHeader("X-Request-Id", "stopped-1"))
	start := time.Now()
	got, err := dc.Completions.New(context.Background(), completion(pdPrompt, 4), option.WithJSONSet("kv_transfer_params", kv))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("answered in %v with a %v ms lease", time.Since(start).Round(time.Millisecond), kv["lease_expires_in_ms"])
	if got.Usage.CompletionTokens == 0 || got.Usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("usage %+v: want a recomputed prompt", got.Usage)
	}
	if n := d.metric(t, `kvlease_remote_prefill_fallbacks_total{model_name="`+modelName+`",reason="handshake_timeout"}`); n != 1 {
		t.Errorf("fallbacks with reason handshake_timeout: %v, want 1", n)
	}
}
