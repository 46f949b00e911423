package synth

import (
	"math/rand/v2"
	"testing"

	"github.com/kvlease/kvlease/model"
)

// BenchmarkExecuteDecode is one decode step of 256 sequences with 512-544
// token contexts, digest-only: the steady state of a busy decode engine.
func BenchmarkExecuteDecode(b *testing.B) {
	zero, _ := LookupProfile("zero")
	d := newDecodeBench(b, zero, false, 256, 512, model.Sampling{})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d.step()
	}
}

// BenchmarkExecutePrefillFull is one 2048-token prefill with the tiny
// profile's arena (512 KiB of KV written and hashed).
func BenchmarkExecutePrefillFull(b *testing.B) {
	p := tinyProfile()
	h := newHarness(b, p, true, 2048/testBlockSize, 1)
	toks := randomTokens(rand.New(rand.NewPCG(1, 1)), 2048)
	r := h.add(1, toks, model.Sampling{})
	h.ensure(r, len(toks))
	batch := model.Batch{Seqs: []model.Seq{{Req: 1, Tokens: toks, Count: len(toks), Blocks: h.pool.Blocks(r.hold), Sample: true}}}
	b.SetBytes(int64(len(toks) * p.BytesPerToken()))
	b.ReportAllocs()
	for b.Loop() {
		h.ex.Execute(&batch, &h.out)
	}
}

// BenchmarkExecuteServedRequest is one request of the load as the
// engine executes it with the zero profile's arena (256 bytes of KV per
// token): a 16-token prefill that samples the first token, then 15 decode
// steps of one token each, under a fresh request number (the prefix-state
// cache sees what a served engine sees). Hot: every request writes the
// same two blocks, which stay in the CPU's caches.
func BenchmarkExecuteServedRequest(b *testing.B) { benchServedRequest(b, 2) }

// BenchmarkExecuteServedRequestColdKV is the same with each request
// writing the next two of 8192 blocks (32 MiB of KV), as a served engine
// whose prefix cache keeps recent blocks writes KV the caches lost long
// ago.
func BenchmarkExecuteServedRequestColdKV(b *testing.B) { benchServedRequest(b, 8192) }

func benchServedRequest(b *testing.B, numBlocks int) {
	zero, _ := LookupProfile("zero")
	h := newHarness(b, zero, true, numBlocks, 1)
	r := h.add(1, randomTokens(rand.New(rand.NewPCG(1, 1)), 16), model.Sampling{})
	h.ensure(r, numBlocks*testBlockSize)
	all := h.pool.Blocks(r.hold)
	toks := make([]int32, 16, 32)
	copy(toks, r.tokens)
	batch := model.Batch{Seqs: make([]model.Seq, 1)}
	req := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		req++
		blocks := all[2*(int(req)%(numBlocks/2)):][:2]
		s := &batch.Seqs[0]
		*s = model.Seq{Req: req, Tokens: toks[:16], Count: 16, Blocks: blocks, Sample: true}
		for {
			h.ex.Execute(&batch, &h.out)
			if len(s.Tokens) == 31 {
				break
			}
			s.Tokens = append(s.Tokens, h.out.Tokens[0])
			s.Start, s.Count = len(s.Tokens)-1, 1
		}
	}
}
