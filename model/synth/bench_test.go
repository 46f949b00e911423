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
