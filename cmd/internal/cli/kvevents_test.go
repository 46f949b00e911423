package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/kvevents/kveventstest"
)

func TestServeKVEventsFlagsAndEnv(t *testing.T) {
	t.Setenv(secretEnv, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kv-events-endpoint", "ipc:///tmp/x"}, "--kv-events-endpoint"},
		{[]string{"--kv-events-endpoint", "tcp://*:70000"}, "--kv-events-endpoint"},
		{[]string{"--kv-events-replay-endpoint", "tcp://*:5558"}, "give --kv-events-endpoint too"},
		{[]string{"--kv-events-endpoint", "tcp://*:5557", "--kv-events-encoding", "json"}, "--kv-events-encoding"},
		{[]string{"--kv-events-endpoint", "tcp://*:5557", "--kv-events-buffer", "0"}, "--kv-events-buffer"},
		{[]string{"--kv-events-endpoint", "tcp://*:5557", "--kv-events-queue", "0"}, "--kv-events-queue"},
		{[]string{"--kv-events-topic", strings.Repeat("t", 256)}, "--kv-events-topic"},
		{[]string{"--kv-events-lease-topic", "leases"}, "--kv-events-lease-topic: give --kv-events-endpoint too"},
		{[]string{"--kv-events-endpoint", "tcp://*:5557", "--kv-events-lease-topic", "leases"}, "neither may be a prefix of the other"},
		{[]string{"--kv-events-endpoint", "tcp://*:5557", "--kv-events-topic", "kv@a", "--kv-events-lease-topic", "kv@a/leases"},
			"neither may be a prefix of the other"},
		{[]string{"--kv-events-endpoint", "tcp://*:5557", "--kv-events-topic", "kv", "--kv-events-lease-topic", "leases"},
			"--kv-events-lease-topic: leases are a prefill engine's"}, // no cluster secret: no leases
	} {
		code, _, stderr := runCmd(t, append([]string{"serve"}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want 1 and %q", c.args, code, stderr, c.want)
		}
	}

	// Every flag comes from KVLEASE_<NAME> too; the command line wins.
	t.Setenv("KVLEASE_KV_EVENTS_ENDPOINT", "tcp://*:5557")
	t.Setenv("KVLEASE_KV_EVENTS_ENCODING", "array")
	t.Setenv("KVLEASE_ADVERTISE_HOST", "10.1.2.3")
	t.Setenv("KVLEASE_MAX_NUM_SEQS", "9")
	t.Setenv("KVLEASE_DIGEST_ONLY", "true")
	t.Setenv("KVLEASE_PORT", "8200")
	f, err := parseServeFlags([]string{"--port", "8300"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.kvEvents.endpoint != "tcp://*:5557" || f.kvEvents.encoding.String() != "array" || f.advertiseHost != "10.1.2.3" ||
		f.sched.MaxNumSeqs != 9 || !f.digestOnly || f.port != 8300 || !f.poolConfig().Events {
		t.Errorf("from the environment: %+v", f)
	}
	t.Setenv("KVLEASE_MAX_NUM_SEQS", "many")
	code, _, stderr := runCmd(t, "serve")
	if code != 1 || !strings.Contains(stderr, `KVLEASE_MAX_NUM_SEQS="many" (--max-num-seqs)`) {
		t.Errorf("bad environment value: exit %d, %q", code, stderr)
	}
}

// completeTokens sends a completion of the prompt given as token ids.
func completeTokens(t *testing.T, url string, prompt []int32) {
	t.Helper()
	ids := make([]string, len(prompt))
	for i, x := range prompt {
		ids[i] = fmt.Sprint(x)
	}
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"m","prompt":[`+strings.Join(ids, ",")+`],"max_tokens":1}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// promptN is a 40-token prompt (two full blocks of 16) unique to n.
func promptN(n int) []int32 {
	p := make([]int32, 40)
	for i := range p {
		p[i] = int32(1 + (n*7+i)%250)
	}
	p[0] = int32(n % 250)
	p[1] = int32(n / 250)
	return p
}

// TestServeKVEvents subscribes to a running kvlease serve with a ZMQ SUB
// socket (zmq4) and decodes its events with the reference decoder, in both
// encodings: a prompt's full blocks are stored as a chain from the root with
// the prefix cache's hashes; a pool of 8 blocks evicts them (BlockRemoved);
// the CPU and disk tiers store them (medium CPU and DISK); and after a
// reconnect the replay socket returns exactly the batches missed.
//
// The map run offloads to a CPU tier of 4 blocks (stores and evictions:
// medium CPU), the array run to a disk tier (medium DISK).
func TestServeKVEvents(t *testing.T) {
	t.Run("map", func(t *testing.T) {
		testServeKVEvents(t, "map", "cpu:4blocks", "BlockStored/CPU", "BlockRemoved/CPU")
	})
	t.Run("array", func(t *testing.T) {
		testServeKVEvents(t, "array", "disk:"+filepath.Join(t.TempDir(), "tier")+":64blocks", "BlockStored/DISK")
	})
}

func testServeKVEvents(t *testing.T, enc, tiers string, wantTierEvents ...string) {
	// With a cluster secret the prefix hashes are keyed from it
	// (kvblock.DeriveHashKey): whoever holds it computes the same hashes.
	secret := []byte(strings.Repeat("cd", 32))
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	key := kvblock.DeriveHashKey(secret)
	url, cancel, exited, errb := serveInProcess(t, "--profile", "zero", "--model", "m",
		"--cluster-secret-file", secretFile, "--transfer-port", "0",
		"--num-blocks", "8", "--block-size", "16", "--offload", tiers,
		"--kv-events-endpoint", "tcp://127.0.0.1:0", "--kv-events-replay-endpoint", "tcp://127.0.0.1:0",
		"--kv-events-topic", "kv@127.0.0.1:8000@m", "--kv-events-encoding", enc)
	m := regexp.MustCompile(`kv events on (tcp://\S+) \(` + enc + ` encoding, replay on (tcp://\S+)\)`).FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("no kv events endpoints announced: %s", errb.String())
	}
	pub, replay := m[1], m[2]

	sub, err := kveventstest.Subscribe(pub, "kv@")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []kveventstest.Msg
	// The subscription reaches the engine asynchronously: send prompts
	// until the first message arrives live (earlier ones come by replay).
	n := 0
	for len(msgs) == 0 {
		if n == 50 {
			t.Fatal("no event after 50 requests")
		}
		completeTokens(t, url, promptN(n))
		n++
		if m, err := sub.Next(100 * time.Millisecond); err == nil {
			msgs = append(msgs, m)
		}
	}
	// Enough prompts to fill the 8-block pool several times over.
	for ; n < 12; n++ {
		completeTokens(t, url, promptN(n))
	}
	lastLive := msgs[len(msgs)-1].Seq
	// Read until quiet: the batches of the requests above.
	for {
		m, err := sub.Next(500 * time.Millisecond)
		if err != nil {
			break
		}
		if m.Seq != lastLive+1 {
			t.Fatalf("live seq %d after %d: a gap on a healthy subscriber", m.Seq, lastLive)
		}
		lastLive = m.Seq
		msgs = append(msgs, m)
	}
	sub.Close()

	// Away: more prompts; then back, with the replay of what was missed.
	for ; n < 16; n++ {
		completeTokens(t, url, promptN(n))
	}
	sub2, err := kveventstest.Subscribe(pub, "kv@")
	if err != nil {
		t.Fatal(err)
	}
	defer sub2.Close()
	var back []kveventstest.Msg
	for n2 := 0; len(back) == 0; n2++ {
		if n2 == 50 {
			t.Fatal("no event after reconnecting")
		}
		completeTokens(t, url, promptN(n))
		n++
		if m, err := sub2.Next(100 * time.Millisecond); err == nil {
			back = append(back, m)
		}
	}
	firstBack := back[0].Seq
	// The subscription became live somewhere inside the prompts above, so
	// the batch storing the last one's blocks may have gone out before it
	// (it is in the replay, not here). One more prompt after the first
	// message: all of its batches come live. Its events may still be on
	// their way (the engine answers before it publishes): read until its
	// last block is stored, so the replay below holds every prompt's.
	completeTokens(t, url, promptN(n))
	n++
	lastHashes := kvblock.AppendHashes(nil, promptN(n-1), 16, kvblock.Extras{Key: key})
	last := string(lastHashes[len(lastHashes)-1][:])
	storedLast := func(m kveventstest.Msg) bool {
		b, err := kveventstest.Decode(enc, m.Payload)
		if err != nil {
			t.Fatalf("seq %d: %v", m.Seq, err)
		}
		for _, ev := range b.Events {
			if ev.Type == "BlockStored" && ev.Medium == "GPU" && slices.Contains(ev.BlockHashes, last) {
				return true
			}
		}
		return false
	}
	for !storedLast(back[len(back)-1]) {
		m, err := sub2.Next(15 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the last prompt's blocks: %v", err)
		}
		back = append(back, m)
	}
	all, err := kveventstest.Replay(replay, 0, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < int(firstBack)+1 {
		t.Fatalf("replay from 0 gave %d batches; the reconnected subscriber is at %d", len(all), firstBack)
	}
	for i, m := range all {
		if m.Seq != int64(i) {
			t.Fatalf("replay: batch %d has seq %d", i, m.Seq)
		}
	}
	// What was received live is what the replay returns, byte for byte.
	for _, m := range append(msgs, back[0]) {
		if !bytes.Equal(all[m.Seq].Payload, m.Payload) {
			t.Fatalf("seq %d: replayed payload differs from the live one", m.Seq)
		}
	}
	missed, err := kveventstest.Replay(replay, lastLive+1, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(missed) < int(firstBack-lastLive-1) || (len(missed) > 0 && missed[0].Seq != lastLive+1) {
		t.Fatalf("replay from %d: %d batches from %v; the subscriber came back at %d", lastLive+1, len(missed), missed, firstBack)
	}

	// Decode everything with the reference decoder.
	stored := map[string]*string{} // GPU hash -> parent (nil: root)
	tokens := map[string][]int64{}
	removed := map[string]bool{}
	media := map[string]bool{}
	for _, m := range all {
		b, err := kveventstest.Decode(enc, m.Payload)
		if err != nil {
			t.Fatalf("seq %d: %v", m.Seq, err)
		}
		for _, ev := range b.Events {
			media[ev.Type+"/"+ev.Medium] = true
			switch {
			case ev.Type == "BlockStored" && ev.Medium == "GPU":
				if ev.BlockSize != 16 || len(ev.TokenIDs) != 16*len(ev.BlockHashes) {
					t.Fatalf("BlockStored %+v", ev)
				}
				parent := ev.Parent
				for i, h := range ev.BlockHashes {
					stored[h] = parent
					tokens[h] = ev.TokenIDs[16*i : 16*i+16]
					hh := h
					parent = &hh
				}
			case ev.Type == "BlockRemoved" && ev.Medium == "GPU":
				for _, h := range ev.BlockHashes {
					removed[h] = true
				}
			}
		}
	}
	for i := range n {
		p := promptN(i)
		hs := kvblock.AppendHashes(nil, p, 16, kvblock.Extras{Key: key})
		if len(hs) != 2 {
			t.Fatalf("prompt %d has %d full blocks", i, len(hs))
		}
		h1, h2 := string(hs[0][:]), string(hs[1][:])
		par1, ok1 := stored[h1]
		par2, ok2 := stored[h2]
		if !ok1 || !ok2 || par1 != nil || par2 == nil || *par2 != h1 {
			t.Fatalf("prompt %d: blocks %x, %x stored %v %v with parents %v, %v; want a chain from the root", i, h1, h2, ok1, ok2, par1, par2)
		}
		if want := slices.Collect(func(yield func(int64) bool) {
			for _, x := range p[:16] {
				yield(int64(x))
			}
		}); !slices.Equal(tokens[h1], want) {
			t.Fatalf("prompt %d: tokens of block 0 %v, want %v", i, tokens[h1], want)
		}
	}
	if len(removed) == 0 {
		t.Errorf("no BlockRemoved on a pool of 8 blocks after %d prompts of 3 blocks", n)
	}
	for k := range removed {
		if _, ok := stored[k]; !ok {
			t.Errorf("removed %x, never stored", k)
		}
	}
	for _, want := range wantTierEvents {
		if !media[want] {
			t.Errorf("no %s event; saw %v", want, media)
		}
	}
	metrics := get(t, url+"/metrics")
	for _, want := range []string{"kvlease_kv_events_published_total", "kvlease_kv_events_dropped_total 0", "kvlease_kv_events_subscribers 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Errorf("exit %d; stderr %s", code, errb.String())
	}
}

// TestServeLeaseEvents runs a prefill and a decode engine with the lease
// topic on at P, subscribes to it with a ZMQ SUB socket and decodes with
// the reference decoder: a lease read by D is granted, claimed by D and
// released read_done, read; a lease whose decode leg is never sent is
// granted and released unclaimed, never claimed. The KV events topic's
// subscriber gets no lease event.
func TestServeLeaseEvents(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(strings.Repeat("ef", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--profile", "zero", "--model", "m", "--cluster-secret-file", secretFile, "--transfer-port", "0", "--kv-lease", "3s"}
	pURL, _, _, perr := serveInProcess(t, append(common, "--role", "prefill",
		"--kv-events-endpoint", "tcp://127.0.0.1:0", "--kv-events-topic", "kv@p",
		"--kv-events-lease-topic", "kvlease-leases@p", "--kv-events-encoding", "array")...)
	dURL, _, _, _ := serveInProcess(t, append(common, "--role", "decode")...)
	m := regexp.MustCompile(`kv events on (tcp://\S+) `).FindStringSubmatch(perr.String())
	if m == nil {
		t.Fatalf("no kv events endpoint announced: %s", perr.String())
	}
	leases, err := kveventstest.Subscribe(m[1], "kvlease-leases@")
	if err != nil {
		t.Fatal(err)
	}
	defer leases.Close()
	kv, err := kveventstest.Subscribe(m[1], "kv@")
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()

	post := func(url, body string) map[string]json.RawMessage {
		t.Helper()
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		var ans map[string]json.RawMessage
		if err := json.Unmarshal(b, &ans); err != nil {
			t.Fatal(err)
		}
		return ans
	}
	prompt := func(n int) string {
		b, _ := json.Marshal(promptN(n))
		return string(b)
	}
	// prefill returns P's kv_transfer_params and the lease id in them.
	prefill := func(n int) (json.RawMessage, string) {
		t.Helper()
		ans := post(pURL, `{"model":"m","prompt":`+prompt(n)+`,"max_tokens":1,"kv_transfer_params":{"do_remote_decode":true}}`)
		var kvp struct {
			LeaseID string `json:"lease_id"`
		}
		if err := json.Unmarshal(ans["kv_transfer_params"], &kvp); err != nil || kvp.LeaseID == "" {
			t.Fatalf("kv_transfer_params %s: %v", ans["kv_transfer_params"], err)
		}
		return ans["kv_transfer_params"], kvp.LeaseID
	}

	// The subscription reaches P asynchronously and lease events are not
	// replayed: prefill (leases nobody claims) until one is seen.
	byLease := map[string][]kveventstest.Lease{}
	collect := func(msg kveventstest.Msg) {
		t.Helper()
		b, err := kveventstest.DecodeLeases("array", msg.Payload)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range b.Events {
			byLease[ev.LeaseID] = append(byLease[ev.LeaseID], ev)
		}
	}
	for n := 0; len(byLease) == 0; n++ {
		if n == 50 {
			t.Fatal("no lease event after 50 prefills")
		}
		prefill(100 + n)
		if msg, err := leases.Next(100 * time.Millisecond); err == nil {
			collect(msg)
		}
	}
	kvp, read := prefill(1)
	post(dURL, `{"model":"m","prompt":`+prompt(1)+`,"max_tokens":4,"kv_transfer_params":`+string(kvp)+`}`)
	_, unclaimed := prefill(2)
	released := func(id string) bool {
		evs := byLease[id]
		return len(evs) > 0 && evs[len(evs)-1].Type == "LeaseReleased"
	}
	deadline := time.Now().Add(20 * time.Second)
	for !released(read) || !released(unclaimed) {
		msg, err := leases.Next(time.Until(deadline))
		if err != nil {
			t.Fatalf("waiting for both releases: %v; have %+v and %+v", err, byLease[read], byLease[unclaimed])
		}
		collect(msg)
	}
	types := func(evs []kveventstest.Lease) string {
		var s []string
		for _, ev := range evs {
			s = append(s, ev.Type)
		}
		return strings.Join(s, " ")
	}
	if evs := byLease[read]; !regexp.MustCompile(`^LeaseGranted LeaseClaimed (LeaseRenewed )*LeaseReleased$`).MatchString(types(evs)) ||
		evs[0].NumBlocks != 3 || evs[0].NumTokens != 40 || evs[0].ExpiresInMs != 3000 || evs[1].Peer == "" ||
		evs[len(evs)-1].Reason != "read_done" || !evs[len(evs)-1].Read {
		t.Errorf("the lease D read: %+v", evs)
	}
	if evs := byLease[unclaimed]; types(evs) != "LeaseGranted LeaseReleased" || evs[1].Reason != "unclaimed" || evs[1].Read {
		t.Errorf("the lease nobody claimed: %+v", evs)
	}
	for {
		msg, err := kv.Next(100 * time.Millisecond)
		if err != nil {
			break
		}
		if _, err := kveventstest.Decode("array", msg.Payload); err != nil || msg.Topic != "kv@p" {
			t.Fatalf("the KV events subscriber got %q: %v", msg.Topic, err)
		}
	}
}
