package synth

import (
	"testing"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

// A masked draw gives only allowed tokens, every allowed byte with weight
// in time, EOS only when allowed.
func TestSampleMasked(t *testing.T) {
	prof, _ := LookupProfile("tiny")
	pool := kvblock.New(kvblock.Config{NumBlocks: 8, BlockSizeTokens: 16})
	e := New(prof, pool, 1)
	set := func(ids ...int32) []uint64 {
		m := make([]uint64, (prof.VocabSize+63)/64)
		for _, id := range ids {
			m[id/64] |= 1 << (id % 64)
		}
		return m
	}
	cases := []struct {
		name string
		mask []uint64
		want map[int32]bool
	}{
		{"json", set('"', '{', '}', '1'), map[int32]bool{'"': true, '{': true, '}': true, '1': true}},
		{"eos only", set(prof.EOS), map[int32]bool{prof.EOS: true}},
		{"weightless", set(0x01, 0x80), map[int32]bool{0x01: true, 0x80: true}},
	}
	for _, c := range cases {
		got := map[int32]bool{}
		for r := uint64(0); r < 3000; r++ {
			got[e.sampleMasked(c.mask, mix64(r))] = true
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: drew %v, want %v", c.name, got, c.want)
		}
		for id := range got {
			if !c.want[id] {
				t.Errorf("%s: drew %d", c.name, id)
			}
		}
	}
	// Through Execute: the mask is honoured.
	blocks := []kvblock.BlockID{}
	h := pool.NewHold(kvblock.HoldRequest, 1)
	pool.Allocate(h, 1)
	blocks = append(blocks, pool.Blocks(h)...)
	var out model.StepResult
	e.Execute(&model.Batch{Seqs: []model.Seq{{Req: 1, Tokens: []int32{'a', 'b'}, Count: 2, Blocks: blocks, Sample: true, Mask: set('{')}}}, &out)
	if out.Tokens[0] != '{' {
		t.Errorf("Execute drew %d under a mask of '{'", out.Tokens[0])
	}
}
