package engine

import (
	"fmt"
	"slices"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/sched"

	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/constrain"
)

// Constrained decoding. A request with a grammar keeps its text's
// position in it (request.cstate). Before each step that samples for it,
// the core puts the mask of the tokens that position accepts into the
// batch (model.Seq.Mask): the executor samples only among them. When the
// step completes, the token's bytes advance the position; once the text
// is complete the request finishes as stopped, on that token, without
// another step. EOS is allowed only where the text may end (a number at
// the top level), and ends it there even under ignore_eos or before
// min_tokens: the grammar allows nothing else. max_tokens can still end a
// text early (finished as length).

// constrain attaches grammar g (nil: none) to a new request.
func (c *Core) constrain(r *request, g *constrain.Grammar) {
	if g == nil {
		return
	}
	if c.vocab == nil {
		c.vocab = constrain.ByteVocab(c.cfg.VocabSize, c.cfg.EOS)
	}
	r.grammar = g
	r.cstate = c.vocab.Start(g)
	c.constrained++
}

// maskBatch sets the masks of the batch's constrained, sampling
// sequences. A text that the grammar leaves free (an auto tool choice
// that chose text) gets no mask. A text that no token of the vocabulary
// can continue (a vocabulary without the bytes an enum value needs, say)
// ends the request with an error, Output.Stuck, rather than with a text
// that breaks the grammar; its sequence samples under an EOS-only mask
// and the step's token is dropped.
func (c *Core) maskBatch(now clock.Instant, b *model.Batch) {
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if !s.Sample {
			continue
		}
		r := c.byID.Get(s.Req)
		if r == nil || r.grammar == nil {
			continue
		}
		r.mask = c.vocab.Mask(&r.cstate, r.mask)
		if r.mask == nil {
			continue
		}
		if !slices.ContainsFunc(r.mask, func(w uint64) bool { return w != 0 }) {
			r.stuck = true
			c.finish(now, r, sched.FinishedError, model.NoToken)
			r.mask = append(r.mask[:0], make([]uint64, c.vocab.Words())...)
			r.mask[c.cfg.EOS/64] |= 1 << (c.cfg.EOS % 64)
		}
		s.Mask = r.mask
	}
}

// advance feeds tok to r's grammar and reports whether the text is
// complete. A token the mask did not allow is an executor bug.
func (c *Core) advance(r *request, tok int32) bool {
	if c.vocab.IsEOS(tok) {
		return !r.cstate.Free() // free text ends as any text does
	}
	if !r.cstate.FeedBytes(c.vocab.Text(tok)) {
		panic(fmt.Sprintf("engine: request %d sampled token %d (%q), which its grammar does not allow", r.ID, tok, c.vocab.Text(tok)))
	}
	return r.cstate.Done()
}
