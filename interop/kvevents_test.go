package interop

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llm-d/llm-d-kv-cache/pkg/kvcache/kvblock"
	llmdevents "github.com/llm-d/llm-d-kv-cache/pkg/kvevents"
	"github.com/llm-d/llm-d-kv-cache/pkg/kvevents/engineadapter"

	kvb "github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/kvevents/kveventstest"
)

const (
	pod       = "pod-a"
	eventsMod = "m"
	topic     = "kv@" + pod + "@" + eventsMod
	blockSize = 16
)

// recorder is the EngineAdapter llm-d's Pool runs: llm-d's own
// VLLMAdapter, whose every decoded message it keeps by sequence number.
type recorder struct {
	inner *engineadapter.VLLMAdapter

	mu      sync.Mutex
	batches map[uint64]llmdevents.EventBatch
	errs    []error
	order   []uint64
}

func (r *recorder) ShardingKey(m *llmdevents.RawMessage) string { return r.inner.ShardingKey(m) }

func (r *recorder) ParseMessage(m *llmdevents.RawMessage) (string, string, llmdevents.EventBatch, error) {
	podID, model, b, err := r.inner.ParseMessage(m)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("seq %d: %w", m.Sequence, err))
	} else if podID != pod || model != eventsMod {
		r.errs = append(r.errs, fmt.Errorf("seq %d: pod %q model %q from topic %q", m.Sequence, podID, model, m.Topic))
	}
	r.batches[m.Sequence] = b
	r.order = append(r.order, m.Sequence)
	return podID, model, b, err
}

// storedHash reports whether a decoded BlockStored of medium GPU holds h.
func (r *recorder) storedHash(h uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.batches {
		for _, ev := range b.Events {
			if s, ok := ev.(*llmdevents.BlockStoredEvent); ok && s.DeviceTier == "GPU" && slices.Contains(s.BlockHashes, h) {
				return true
			}
		}
	}
	return false
}

// conversationPrompts are n prompts of token ids, in pairs: a 40-token
// prompt (two full blocks of 16) unique to the pair, then the same 40
// tokens and 24 more (four full blocks, the first two its predecessor's),
// as a conversation's next turn extends the last.
func conversationPrompts(n int) [][]int32 {
	var out [][]int32
	for k := 0; len(out) < n; k++ {
		a := make([]int32, 40)
		for i := range a {
			a[i] = int32(1 + (k*7+i)%250)
		}
		a[0] = int32(k % 250)
		b := slices.Clone(a)
		for i := range 24 {
			b = append(b, int32(1+(k*13+i*3)%250))
		}
		out = append(out, a, b)
	}
	return out[:n]
}

func completeTokens(t *testing.T, url string, prompt []int32) {
	t.Helper()
	ids := make([]string, len(prompt))
	for i, x := range prompt {
		ids[i] = fmt.Sprint(x)
	}
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"`+eventsMod+`","prompt":[`+strings.Join(ids, ",")+`],"max_tokens":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("completion: %s", resp.Status)
	}
}

// lowBits is a kvlease block hash as llm-d reads a bytes hash: its last 8
// bytes, big-endian.
func lowBits(h kvb.Hash) uint64 { return binary.BigEndian.Uint64(h[len(h)-8:]) }

// TestS32LLMDReadsKVEvents subscribes llm-d-kv-cache's KV events pipeline
// (its ZMQ subscriber, Pool, VLLMAdapter decoder and an in-memory index) to
// `kvlease serve`, in every encoding kvlease offers, the default first;
// 12 prompts (6 conversations of 2 turns) go through an 8-block pool.
// llm-d's decoder must read, with no error: every prompt's full blocks,
// each block's 16 token ids equal to the prompt's, its hash equal to
// kvlease's prefix hash and its parent_block_hash the previous block's (nil
// for a prompt's first); a BlockRemoved for the evicted blocks, each stored
// before; and from the replay socket the same batches as live. Then llm-d's
// index, queried with llm-d's own request keys of the last prompt's tokens,
// names the kvlease pod for every block, and for none of an evicted
// prompt's.
func TestS32LLMDReadsKVEvents(t *testing.T) {
	for _, enc := range []string{"", "map", "array"} {
		name := enc
		if enc == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) { testLLMDReadsKVEvents(t, enc) })
	}
}

func testLLMDReadsKVEvents(t *testing.T, enc string) {
	secret := []byte(strings.Repeat("ab", 32))
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--profile", "zero", "--model", eventsMod, "--cluster-secret-file", secretFile,
		"--transfer-port", "0", "--num-blocks", "8", "--block-size", fmt.Sprint(blockSize),
		"--kv-events-endpoint", "tcp://127.0.0.1:0", "--kv-events-replay-endpoint", "tcp://127.0.0.1:0",
		"--kv-events-topic", topic}
	if enc != "" {
		args = append(args, "--kv-events-encoding", enc)
	}
	e := serve(t, args...)
	if e.Events == "" || e.Replay == "" {
		t.Fatalf("no kv events endpoints in %q", e.Line)
	}
	if enc == "" && !strings.Contains(e.Line, "(map encoding") {
		t.Fatalf("default encoding: %q", e.Line)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	index, err := kvblock.NewInMemoryIndex(kvblock.DefaultInMemoryIndexConfig())
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := kvblock.NewChunkedTokenDatabase(&kvblock.TokenProcessorConfig{BlockSizeTokens: blockSize})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{inner: engineadapter.NewVLLMAdapter(), batches: map[uint64]llmdevents.EventBatch{}}
	pool := llmdevents.NewPool(&llmdevents.Config{TopicFilter: "kv@", Concurrency: 1}, index, tokens, rec)
	pool.Start(ctx)
	defer pool.Shutdown(ctx)
	subs := llmdevents.NewSubscriberManager(pool)
	defer subs.Shutdown(ctx)
	if err := subs.EnsureSubscriber(ctx, pod, e.Events, "kv@", true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "llm-d's subscriber to connect", func() bool { return metric(t, e.URL, "kvlease_kv_events_subscribers") == 1 })

	key := kvb.DeriveHashKey(secret)
	prompts := conversationPrompts(12)
	want := map[uint64][]int32{}  // every full block's hash -> its tokens
	parent := map[uint64]uint64{} // -> its parent's hash (0: none)
	promptHashes := make([][]uint64, len(prompts))
	for i, p := range prompts {
		hs := kvb.AppendHashes(nil, p, blockSize, kvb.Extras{Key: key})
		for j, h := range hs {
			x := lowBits(h)
			promptHashes[i] = append(promptHashes[i], x)
			want[x] = p[j*blockSize : (j+1)*blockSize]
			if j > 0 {
				parent[x] = lowBits(hs[j-1])
			} else {
				parent[x] = 0
			}
		}
		completeTokens(t, e.URL, p)
	}
	last := promptHashes[len(prompts)-1]
	if !poll(func() bool { return rec.storedHash(last[len(last)-1]) }) {
		rec.mu.Lock()
		events := 0
		for _, b := range rec.batches {
			events += len(b.Events)
		}
		t.Fatalf("waited %v for the last prompt's last block: llm-d's decoder read %d batches holding %d events, errors %v",
			waitTimeout, len(rec.batches), events, rec.errs)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, err := range rec.errs {
		t.Error(err)
	}
	if len(rec.batches) == 0 {
		t.Fatal("llm-d decoded no batch")
	}
	// Live batches arrive in sequence, without a gap.
	for i := 1; i < len(rec.order); i++ {
		if rec.order[i] != rec.order[i-1]+1 {
			t.Fatalf("llm-d's subscriber got seq %d after %d", rec.order[i], rec.order[i-1])
		}
	}
	// Every event as llm-d decoded it: stores chain, removals were stored.
	gotTokens := map[uint64][]uint32{}
	gotParent := map[uint64]uint64{}
	removed := map[uint64]bool{}
	events := 0
	for _, seq := range rec.order {
		for _, ev := range rec.batches[seq].Events {
			events++
			switch ev := ev.(type) {
			case *llmdevents.BlockStoredEvent:
				if ev.DeviceTier != "GPU" || ev.BlockSize != blockSize || len(ev.Tokens) != blockSize*len(ev.BlockHashes) {
					t.Fatalf("seq %d: BlockStored tier %q block size %d, %d tokens for %d hashes", seq, ev.DeviceTier, ev.BlockSize, len(ev.Tokens), len(ev.BlockHashes))
				}
				p := ev.ParentHash
				for j, h := range ev.BlockHashes {
					if _, dup := gotTokens[h]; dup && !removed[h] {
						t.Errorf("seq %d: block %x stored twice", seq, h)
					}
					delete(removed, h)
					gotTokens[h] = ev.Tokens[j*blockSize : (j+1)*blockSize]
					gotParent[h] = p
					p = h
				}
			case *llmdevents.BlockRemovedEvent:
				if ev.DeviceTier != "GPU" {
					t.Fatalf("seq %d: BlockRemoved tier %q", seq, ev.DeviceTier)
				}
				for _, h := range ev.BlockHashes {
					if _, ok := gotTokens[h]; !ok || removed[h] {
						t.Errorf("seq %d: removed %x, not stored", seq, h)
					}
					removed[h] = true
				}
			default:
				t.Errorf("seq %d: event %T", seq, ev)
			}
		}
	}
	blocks, ids := 0, 0
	for i, hs := range promptHashes {
		for _, h := range hs {
			got, ok := gotTokens[h]
			if !ok {
				t.Fatalf("prompt %d: block %x not decoded by llm-d (decoded %d events in %d batches)", i, h, events, len(rec.order))
			}
			if gotParent[h] != parent[h] {
				t.Errorf("prompt %d: block %x has parent %x, want %x", i, h, gotParent[h], parent[h])
			}
			for j, x := range want[h] {
				if got[j] != uint32(x) {
					t.Fatalf("prompt %d: block %x token %d is %d, want %d", i, h, j, got[j], x)
				}
			}
			blocks++
			ids += len(got)
		}
	}
	if len(gotTokens) != len(want) {
		t.Errorf("llm-d decoded %d distinct blocks, the prompts have %d", len(gotTokens), len(want))
	}
	if len(removed) == 0 {
		t.Error("no BlockRemoved decoded: 12 prompts went through an 8-block pool")
	}
	t.Logf("encoding %q: llm-d decoded %d batches, %d events: %d prompts, %d blocks (%d distinct), %d token ids equal, %d blocks removed",
		name(enc), len(rec.order), events, len(prompts), blocks, len(gotTokens), ids, len(removed))

	// The replay socket returns what was published live, and llm-d's
	// decoder reads it the same.
	replay, err := kveventstest.Replay(e.Replay, 0, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	fresh := engineadapter.NewVLLMAdapter()
	for _, m := range replay {
		live, ok := rec.batches[uint64(m.Seq)]
		if !ok {
			continue // published before llm-d's subscriber joined
		}
		_, _, b, err := fresh.ParseMessage(&llmdevents.RawMessage{Topic: topic, Sequence: uint64(m.Seq), Payload: m.Payload})
		if err != nil {
			t.Fatalf("replayed seq %d: %v", m.Seq, err)
		}
		if !reflect.DeepEqual(b.Events, live.Events) {
			t.Fatalf("replayed seq %d decodes to %d events, live %d", m.Seq, len(b.Events), len(live.Events))
		}
	}
	if n := len(replay); n == 0 || replay[n-1].Seq != int64(rec.order[len(rec.order)-1]) {
		t.Fatalf("replay from 0 gave %d batches; live ended at seq %d", n, rec.order[len(rec.order)-1])
	}

	// llm-d's index, fed by its Pool from the same events: the last
	// prompt's blocks are on the pod; the first prompt's were evicted.
	lookup := func(p []int32) int {
		tok := make([]uint32, len(p))
		for i, x := range p {
			tok[i] = uint32(x)
		}
		keys, err := tokens.TokensToKVBlockKeys(kvblock.EmptyBlockHash, tok, eventsMod, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := index.Lookup(ctx, keys, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range keys {
			for _, pe := range got[k] {
				if pe.PodIdentifier == pod {
					n++
				}
			}
		}
		return n
	}
	lastPrompt := prompts[len(prompts)-1]
	rec.mu.Unlock()
	waitFor(t, "llm-d's index to hold the last prompt", func() bool { return lookup(lastPrompt) == len(lastPrompt)/blockSize })
	rec.mu.Lock()
	if !removed[promptHashes[0][0]] {
		t.Fatal("the first prompt's first block was not evicted")
	}
	if n := lookup(prompts[0]); n != 0 {
		t.Errorf("llm-d's index still has %d blocks of the evicted first prompt on %s", n, pod)
	}
}

func name(enc string) string {
	if enc == "" {
		return "default"
	}
	return enc
}
