package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	synth "github.com/kvlease/kvlease/model/synth"
	"github.com/kvlease/kvlease/sched"
)

// Oracle runs a request alone on one single-role engine and returns its
// tokens and status: what every P/D run of the same request must produce.
type Oracle struct {
	spec  Spec
	cache map[string]oracleResult
}

type oracleResult struct {
	tokens []int32
	status sched.Status
}

// NewOracle returns an oracle for spec's model.
func NewOracle(spec Spec) *Oracle { return &Oracle{spec: spec, cache: map[string]oracleResult{}} }

// Run returns the reference tokens and status of r.
func (o *Oracle) Run(r *Req) ([]int32, sched.Status) {
	key := oracleKey(r)
	if res, ok := o.cache[key]; ok {
		return res.tokens, res.status
	}
	s := o.spec
	bpt := s.Profile.BytesPerToken()
	if s.DigestOnly {
		bpt = 0
	}
	need := (len(r.Prompt)+r.MaxTokens)/s.BlockSize + 2
	// A decoder stops a request at its pool's capacity in tokens
	// (sched.Scheduler.MaxLen) when MaxTokens would take it further: so
	// does the reference, on a pool of the same capacity.
	dblocks := s.Blocks
	if s.DecodeBlocks > 0 {
		dblocks = s.DecodeBlocks
	}
	need = min(need, dblocks)
	core := engine.NewCore(engine.Config{
		Pool:  kvblock.Config{NumBlocks: need, BlockSizeTokens: s.BlockSize, BytesPerToken: bpt},
		Sched: sched.DefaultConfig(), MaxModelLen: s.Profile.MaxModelLen,
		VocabSize: s.Profile.VocabSize, EOS: s.Profile.EOS,
	}, rand.New(rand.NewPCG(1, 2)))
	exec := synth.New(s.Profile, core.Pool(), s.ModelSeed)
	if res := core.Add(0, &engine.Request{ID: "oracle", Prompt: r.Prompt, MaxTokens: r.MaxTokens,
		Sampling: r.Sampling, SeedSet: true, IgnoreEOS: r.IgnoreEOS}); res != engine.Accepted {
		panic("sim: oracle rejected the request: " + res.String())
	}
	var out oracleResult
	var res model.StepResult
	now := clock.Instant(0)
	for done := false; !done; {
		rd := core.Step(now)
		for _, o := range rd.Outputs {
			if o.Token != model.NoToken {
				out.tokens = append(out.tokens, o.Token)
			}
			if o.Finished {
				out.status, done = o.Status, true
			}
		}
		if rd.Batch != nil {
			exec.Execute(rd.Batch, &res)
			now = now.Add(res.Duration)
			core.Complete(now, &res)
		} else if !done {
			panic("sim: oracle engine stalled")
		}
	}
	o.cache[key] = out
	return out.tokens, out.status
}

// oracleKey is everything the reference run depends on, exactly: the
// prompt, the output bound, the sampling parameters and IgnoreEOS.
func oracleKey(r *Req) string {
	b := make([]byte, 0, 4*len(r.Prompt)+64)
	b = fmt.Appendf(b, "%d %v %v|", r.MaxTokens, r.Sampling, r.IgnoreEOS)
	for _, t := range r.Prompt {
		b = append(b, byte(t), byte(t>>8), byte(t>>16), byte(t>>24))
	}
	return string(b)
}

// Verify compares every request that finished normally with the oracle and
// returns the differences.
func (o *Oracle) Verify(c *World) []string {
	var bad []string
	for _, r := range c.Ordered() {
		if !r.Done || r.Error != "" || r.clientGone {
			continue
		}
		want, st := o.Run(r)
		if r.Status != st || !equalTokens(r.Tokens, want) {
			bad = append(bad, fmt.Sprintf("request %s: got %v %v, oracle %v %v (pulled %v, fallback %v)",
				r.ID, r.Status, r.Tokens, st, want, r.Pulled, r.Fallback))
		}
	}
	return bad
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
