package llama

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
)

// Executor is a llama-architecture model.Executor over a kvblock pool: the
// keys and values of every computed position are written into the pool's
// slots and attention reads them back from there (see the package
// documentation for the layout). Create it with New. Not safe for concurrent
// use; it belongs to one engine and its pool.
type Executor struct {
	w         *Weights
	cfg       Config
	pool      *kvblock.Pool
	blockSize int
	hd        int       // head width
	qDim      int       // Heads × hd
	kvDim     int       // KVHeads × hd
	group     int       // query heads per kv head
	invFreq   []float64 // RoPE: theta^(-2i/hd) / factor i / linear scale, i < hd/2
	attScale  float32
	run       Runner
	viewKV    bool // the pool's slots can be read as []float32 in place (viewF32)

	// Per-step scratch, grown on demand and reused: a step allocates
	// nothing once the buffers have reached the largest batch.
	n        int       // rows (computed positions) of the step
	rowPos   []int     // position of each row
	rowSeq   []int     // batch index of each row
	x, xb    []float32 // n × Dim: residual, normed input
	xo       []float32 // n × max(QDim, Dim): attention output, then feed-forward output
	q        []float32 // n × QDim
	k, v     []float32 // n × KVDim
	h1, h3   []float32 // n × HiddenDim
	rope     []float32 // n × hd: cos, sin interleaved per pair
	scores   []float32 // per worker: MaxSeqLen+1 attention weights
	sampled  []int     // row of each sampling sequence
	scored   []int     // rows whose logits score a prompt token (Sampling.PromptLogprobs)
	logits   []float32 // len(sampled) × VocabSize
	sxb      []float32 // scoreRows × Dim: scored rows' normed input
	slogits  []float32 // scoreRows × VocabSize: their logits
	probs    []float64
	unmasked []float32 // a masked row's logits before the mask, for its logprobs
	order    []int32
	tops     []model.TokenLogprob // the step's top logprobs, MaxTopLogprobs per sampling sequence
	plp      []model.Logprobs     // the step's prompt logprobs
	pen      []float32            // penalized logits (Sampling.Penalized)
	counts   []int32              // ApplyPenalties' scratch, zeros
	batch    *model.Batch
	layer    int

	mm   matmulTask
	attn attnTask
}

var _ model.Executor = (*Executor)(nil)

// New returns an executor for w writing into pool, whose BytesPerToken must
// be w.Config.BytesPerToken() (float32 K and V). run spreads independent
// work over workers (nil runs everything on the caller's goroutine); results
// never depend on it.
func New(w *Weights, pool *kvblock.Pool, run Runner) (*Executor, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	c := w.Config
	if bpt := pool.Config().BytesPerToken; bpt != c.BytesPerToken() {
		return nil, fmt.Errorf("llama: the pool has %d KV bytes per token, the model needs %d (2 × %d layers × %d kv heads × %d head dim × %d bytes)",
			bpt, c.BytesPerToken(), c.Layers, c.KVHeads, c.HeadDim(), KVBytes)
	}
	if run == nil {
		run = Serial{}
	}
	e := &Executor{
		w: w, cfg: c, pool: pool, blockSize: pool.BlockSizeTokens(),
		hd: c.HeadDim(), qDim: c.QDim(), kvDim: c.KVDim(), group: c.Heads / c.KVHeads,
		attScale: float32(1 / math.Sqrt(float64(c.HeadDim()))),
		run:      run,
	}
	if b := pool.SlotBytes(0, 0); littleEndian && len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		e.viewKV = true // every slot is: BytesPerToken is a multiple of 4
	}
	e.invFreq = make([]float64, e.hd/2)
	for i := range e.invFreq {
		f := math.Pow(c.RopeTheta, -float64(2*i)/float64(e.hd))
		if w.RopeFactors != nil {
			f /= float64(w.RopeFactors[i])
		}
		if c.RopeScale > 0 {
			f /= c.RopeScale
		}
		e.invFreq[i] = f
	}
	e.mm.e = e
	e.attn.e = e
	return e, nil
}

// Config is the model's configuration.
func (e *Executor) Config() Config { return e.cfg }

// Execute computes the batch: the KV of positions Start..Start+Count-1 of
// every sequence goes into its blocks (with each slot's digest), and each
// sequence with Sample set gets the token sampled from the logits of its
// last position. out.Duration is 0: the work is done when Execute returns.
//
// An inconsistent batch (positions outside Tokens, blocks that do not cover
// them, Sample without computing the last position, a token outside the
// vocabulary) is an engine bug and panics.
func (e *Executor) Execute(b *model.Batch, out *model.StepResult) {
	out.Tokens = out.Tokens[:0]
	out.Logprobs = out.Logprobs[:0]
	out.PromptLogprobs = out.PromptLogprobs[:0]
	out.Duration = 0
	e.batch = b
	e.tops, e.plp = e.tops[:0], e.plp[:0]
	e.n = 0
	e.rowPos, e.rowSeq, e.sampled, e.scored = e.rowPos[:0], e.rowSeq[:0], e.sampled[:0], e.scored[:0]
	for i := range b.Seqs {
		s := &b.Seqs[i]
		e.check(s)
		for p := s.Start; p < s.Start+s.Count; p++ {
			e.rowPos = append(e.rowPos, p)
			e.rowSeq = append(e.rowSeq, i)
		}
		if s.Sample {
			e.sampled = append(e.sampled, len(e.rowPos)-1)
		}
		if s.Sampling.PromptLogprobs {
			// Position q's row scores prompt token q+1.
			from, to := model.PromptRange(s.Start, s.Count, s.NumPromptTokens)
			first := len(e.rowPos) - s.Count
			for k := from; k < to; k++ {
				e.scored = append(e.scored, first+k-1-s.Start)
			}
		}
	}
	e.n = len(e.rowPos)
	if e.n > 0 {
		e.forward()
		e.scorePrompt()
	}
	j, sc := 0, 0
	V := e.cfg.VocabSize
	for i := range b.Seqs {
		tok := model.NoToken
		var lp model.Logprobs
		s := &b.Seqs[i]
		var plp model.PromptLogprobs
		if s.Sampling.PromptLogprobs {
			from, to := model.PromptRange(s.Start, s.Count, s.NumPromptTokens)
			plp = model.PromptLogprobs{From: from, Entries: e.plp[sc : sc+to-from : sc+to-from]}
			sc += to - from
		}
		if s.Sample {
			logits := e.logits[j*V : (j+1)*V]
			var lse float64
			if s.Sampling.Logprobs {
				// Before sampling: a Mask sets logits to -Inf.
				lse, lp.Top = e.topLogprobs(logits, s.Sampling.TopLogprobs)
			}
			if s.Sampling.Penalized() {
				// On a copy: the logprobs stay the model's.
				e.pen = grow(e.pen, V)
				copy(e.pen, logits)
				if len(e.counts) < V {
					e.counts = make([]int32, V)
				}
				model.ApplyPenalties(e.pen, s, e.counts)
				tok = e.sample(s, e.pen)
			} else {
				tok = e.sample(s, logits)
			}
			if s.Sampling.Logprobs {
				lp.Logprob = logprobAt(logits, tok, lse)
			}
			j++
		}
		out.Tokens = append(out.Tokens, tok)
		out.Logprobs = append(out.Logprobs, lp)
		out.PromptLogprobs = append(out.PromptLogprobs, plp)
	}
	e.batch = nil
}

func (e *Executor) check(s *model.Seq) {
	end := s.Start + s.Count
	switch {
	case s.Start < 0 || s.Count < 0 || end > len(s.Tokens):
		panic(fmt.Sprintf("llama: req %d computes positions [%d, %d) of %d tokens", s.Req, s.Start, end, len(s.Tokens)))
	case len(s.Blocks)*e.blockSize < end:
		panic(fmt.Sprintf("llama: req %d: %d blocks of %d tokens do not cover %d positions", s.Req, len(s.Blocks), e.blockSize, end))
	case s.Sample && (end != len(s.Tokens) || s.Count == 0):
		panic(fmt.Sprintf("llama: req %d samples after computing [%d, %d) of %d tokens: the last position must be computed", s.Req, s.Start, end, len(s.Tokens)))
	}
	for _, t := range s.Tokens[s.Start:end] {
		if t < 0 || int(t) >= e.cfg.VocabSize {
			panic(fmt.Sprintf("llama: req %d: token %d outside the vocabulary of %d", s.Req, t, e.cfg.VocabSize))
		}
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// forward runs the transformer over the step's rows, writing K and V into
// the pool layer by layer, and leaves the logits of the sampling rows in
// e.logits.
func (e *Executor) forward() {
	c, n := e.cfg, e.n
	e.x, e.xb, e.xo = grow(e.x, n*c.Dim), grow(e.xb, n*c.Dim), grow(e.xo, n*max(e.qDim, c.Dim))
	e.q = grow(e.q, n*e.qDim)
	e.k, e.v = grow(e.k, n*e.kvDim), grow(e.v, n*e.kvDim)
	e.h1, e.h3 = grow(e.h1, n*c.HiddenDim), grow(e.h3, n*c.HiddenDim)
	e.rope = grow(e.rope, n*e.hd)
	for r := 0; r < n; r++ {
		s := &e.batch.Seqs[e.rowSeq[r]]
		e.w.Embedding.Row(int(s.Tokens[e.rowPos[r]]), e.x[r*c.Dim:(r+1)*c.Dim])
		e.ropeTable(e.rowPos[r], e.rope[r*e.hd:(r+1)*e.hd])
	}
	for l := range e.w.Layers {
		L := &e.w.Layers[l]
		e.layer = l
		for r := 0; r < n; r++ {
			rmsnorm(e.xb[r*c.Dim:(r+1)*c.Dim], e.x[r*c.Dim:(r+1)*c.Dim], L.AttnNorm, c.NormEps)
		}
		e.matmul(e.q, &L.Wq, e.xb, n)
		e.matmulSame(e.k, &L.Wk, e.xb, n)
		e.matmulSame(e.v, &L.Wv, e.xb, n)
		for r := 0; r < n; r++ {
			rt := e.rope[r*e.hd : (r+1)*e.hd]
			q := e.q[r*e.qDim : (r+1)*e.qDim]
			k := e.k[r*e.kvDim : (r+1)*e.kvDim]
			v := e.v[r*e.kvDim : (r+1)*e.kvDim]
			addBias(q, L.BQ)
			addBias(k, L.BK)
			addBias(v, L.BV)
			e.headsRope(q, L.QNorm, rt)
			e.headsRope(k, L.KNorm, rt)
			e.storeKV(r, l, k, v)
		}
		// Every row's K and V of this layer is in the pool before any row
		// attends: a chunk's positions attend to each other.
		e.attn.run()
		e.matmul(e.xb, &L.Wo, e.xo, n)
		for i := range e.x[:n*c.Dim] {
			e.x[i] += e.xb[i]
		}
		for r := 0; r < n; r++ {
			rmsnorm(e.xb[r*c.Dim:(r+1)*c.Dim], e.x[r*c.Dim:(r+1)*c.Dim], L.FFNNorm, c.NormEps)
		}
		e.matmul(e.h1, &L.W1, e.xb, n)
		e.matmulSame(e.h3, &L.W3, e.xb, n)
		h1 := e.h1[:n*c.HiddenDim]
		h3 := e.h3[:len(h1)]
		siluMul(h1, h3)
		e.matmul(e.xo, &L.W2, e.h1, n)
		for i := range e.x[:n*c.Dim] {
			e.x[i] += e.xo[i]
		}
	}
	// Digests: a slot is complete once its last layer is written.
	for r := 0; r < n; r++ {
		blk, slot := e.slot(r)
		e.pool.Digests(blk)[slot] = kvblock.SlotDigest(e.pool.SlotBytes(blk, slot))
	}
	ns := len(e.sampled)
	if ns == 0 {
		return
	}
	// Only the sampling rows get the final norm and logits (the rows
	// scoring prompt tokens get theirs in scorePrompt).
	for j, r := range e.sampled {
		rmsnorm(e.xb[j*c.Dim:(j+1)*c.Dim], e.x[r*c.Dim:(r+1)*c.Dim], e.w.FinalNorm, c.NormEps)
	}
	e.logits = grow(e.logits, ns*c.VocabSize)
	e.matmul(e.logits, &e.w.Output, e.xb, ns)
}

// scoreRows bounds the rows scorePrompt computes logits for at once: a
// prompt's logits are never all in memory (a 8,192-token chunk of a
// 32,000-token vocabulary would be 1 GiB).
const scoreRows = 32

// scorePrompt computes the logprobs of the prompt tokens the step's
// scored rows predict (Sampling.PromptLogprobs) into e.plp, in row order,
// scoreRows rows at a time.
func (e *Executor) scorePrompt() {
	c := e.cfg
	for lo := 0; lo < len(e.scored); lo += scoreRows {
		rows := e.scored[lo:min(lo+scoreRows, len(e.scored))]
		e.sxb = grow(e.sxb, len(rows)*c.Dim)
		e.slogits = grow(e.slogits, len(rows)*c.VocabSize)
		for j, r := range rows {
			rmsnorm(e.sxb[j*c.Dim:(j+1)*c.Dim], e.x[r*c.Dim:(r+1)*c.Dim], e.w.FinalNorm, c.NormEps)
		}
		e.matmul(e.slogits, &e.w.Output, e.sxb, len(rows))
		for j, r := range rows {
			s := &e.batch.Seqs[e.rowSeq[r]]
			tok := s.Tokens[e.rowPos[r]+1]
			logits := e.slogits[j*c.VocabSize : (j+1)*c.VocabSize]
			lp := e.logprobs(logits, tok, s.Sampling.PromptTopLogprobs)
			lp.Rank = rank(logits, tok)
			e.plp = append(e.plp, lp)
		}
	}
}

// slot is the pool slot of row r.
func (e *Executor) slot(r int) (kvblock.BlockID, int) {
	s := &e.batch.Seqs[e.rowSeq[r]]
	p := e.rowPos[r]
	return s.Blocks[p/e.blockSize], p % e.blockSize
}

// kvOffset is the byte offset of (layer l, K or V, kv head g) in a slot:
// the slot layout is [layer][K, V][kv head][head dim] float32 little-endian.
func (e *Executor) kvOffset(l, kv, g int) int {
	return ((l*2+kv)*e.cfg.KVHeads + g) * e.hd * KVBytes
}

func (e *Executor) storeKV(r, l int, k, v []float32) {
	blk, slot := e.slot(r)
	b := e.pool.SlotBytes(blk, slot)
	putF32s(b[e.kvOffset(l, 0, 0):], k)
	putF32s(b[e.kvOffset(l, 1, 0):], v)
}

func putF32s(b []byte, f []float32) {
	b = b[:4*len(f)]
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
}

// ropeTable fills t with (cos, sin) of position p for each pair of a head.
// The angles are computed in float64 and rounded once.
func (e *Executor) ropeTable(p int, t []float32) {
	for i, f := range e.invFreq {
		a := float64(p) * f
		t[2*i] = float32(math.Cos(a))
		t[2*i+1] = float32(math.Sin(a))
	}
}

// headsRope applies, to each head of x (one row's queries or keys), the
// per-head RMSNorm of weights norm when not nil, then RoPE in the model's
// pairing with the row's table t.
func (e *Executor) headsRope(x, norm, t []float32) {
	for h := 0; h < len(x); h += e.hd {
		head := x[h : h+e.hd]
		if norm != nil {
			rmsnorm(head, head, norm, e.cfg.NormEps)
		}
		if e.cfg.Rope == RopeHalves {
			rotateHalves(head, t)
		} else {
			rotate(head, t)
		}
	}
}

// addBias adds b (when not nil) to x element by element.
func addBias(x, b []float32) {
	if b == nil {
		return
	}
	b = b[:len(x)]
	for i := range x {
		x[i] += b[i]
	}
}

// rotate applies RoPE to one head: pairs (x[2i], x[2i+1]) rotate by the
// angle of pair i (adjacent pairs, as llama2.c and GGUF's llama use).
func rotate(x, t []float32) {
	t = t[:len(x)]
	for i := 0; i+1 < len(x); i += 2 {
		c, s := t[i], t[i+1]
		a, b := x[i], x[i+1]
		x[i] = float32(a*c) - float32(b*s)
		x[i+1] = float32(a*s) + float32(b*c)
	}
}

// rotateHalves applies RoPE to one head: pairs (x[i], x[i+len/2]) rotate
// by the angle of pair i (qwen2 and qwen3), each element rounded as in
// rotate.
func rotateHalves(x, t []float32) {
	h := len(x) / 2
	t = t[:len(x)]
	lo, hi := x[:h], x[h:2*h]
	for i := range lo {
		c, s := t[2*i], t[2*i+1]
		a, b := lo[i], hi[i]
		lo[i] = float32(a*c) - float32(b*s)
		hi[i] = float32(a*s) + float32(b*c)
	}
}

// rmsnorm writes w[i] · (x[i] / rms(x)) into dst (dst may be x).
func rmsnorm(dst, x, w []float32, eps float32) {
	ss := dotF32(x, x)
	ss = ss/float32(len(x)) + eps
	inv := float32(1 / math.Sqrt(float64(ss)))
	w = w[:len(x)]
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = w[i] * float32(inv*v)
	}
}

// matmul sets out[r×Rows + o] = m row o · in[r×Cols ...] for rows r < n.
// Work is split over output rows of m: each weight row is read once per step
// and used for all n inputs while it is in cache; the F32 and quantised
// kernels (mulF32, mulInt, mulQuant) apply it to several inputs per load,
// in the order of the one-input kernel, so an input's outputs do not
// depend on n. Steps of 6 F32 inputs or more take the prompt kernel
// (mulF32Prompt: tiles of rows × inputs in registers, blocked over
// columns; the same order again). The types with integer kernels (actOf)
// first round each input row to 8-bit blocks (acts); matmulSame reuses
// that rounding for the next matrix with the same input.
func (e *Executor) matmul(out []float32, m *Matrix, in []float32, n int) {
	for k := range e.mm.acts {
		e.mm.acts[k].src = nil
	}
	e.matmulSame(out, m, in, n)
}

// matmulSame is matmul with the input of the previous matmul (unchanged
// since): Q, K and V of one input, gate and up.
func (e *Executor) matmulSame(out []float32, m *Matrix, in []float32, n int) {
	e.mm.out, e.mm.m, e.mm.in, e.mm.n = out, m, in, n
	if needsSums(m.Type) && actOf(m.Type) == actNone {
		e.mm.sums = blockSums(e.mm.sums, in, m.Cols, n)
	}
	if k := actOf(m.Type); k != actNone {
		a := &e.mm.acts[k]
		if a.src != &in[0] || a.n != n || a.cols != m.Cols {
			a.size(k, m.Cols, n)
			e.mm.quant = quantTask{a: a, x: in}
			e.run.Run((n+quantRows-1)/quantRows, &e.mm.quant)
			e.mm.quant.x = nil
			a.src = &in[0]
		}
	}
	if w := e.run.Workers(); len(e.mm.acc) < w {
		e.mm.acc = make([][]float32, w)
	}
	e.mm.workers = e.run.Workers()
	e.run.Run((m.Rows+matmulChunk-1)/matmulChunk, &e.mm)
	e.mm.out, e.mm.m, e.mm.in = nil, nil, nil
}

// matmulChunk is the number of weight rows in one unit of parallel work.
// parallel work.
const matmulChunk = 64

// unitBlock is the block of rows (of units) that unit i multiplies: the
// blocks split into workers runs of consecutive blocks (sizes differing by
// at most one), and the units take the runs' first blocks in turn, then
// their second ones, and so on. Workers take units in order from one
// counter, so each worker walks one run of weights from memory instead
// of every workers-th block, and the hardware prefetcher is not restarted
// at every unit: TinyLlama Q4_K_M's one-sequence decode on two cores ran
// 7-9% faster than with unit i multiplying block i (docs/benchmarks.md);
// 128-row units gained 4% without it and nothing with it.
// A bijection on [0, units) for any workers ≥ 1.
func unitBlock(i, units, workers int) int {
	if workers <= 1 || units <= workers {
		return i
	}
	q, rem := units/workers, units%workers
	r, s := i/workers, i%workers
	if r >= q {
		r, s = q, i-q*workers
	}
	return s*q + min(s, rem) + r
}

// quantRows is the number of input rows one unit of quantTask rounds.
const quantRows = 8

// quantTask rounds input rows into acts, quantRows rows per unit.
type quantTask struct {
	a *acts
	x []float32
}

func (t *quantTask) Do(_, i int) {
	t.a.quantizeRows(t.x, i*quantRows, min((i+1)*quantRows, t.a.n))
}

type matmulTask struct {
	e   *Executor
	out []float32
	m   *Matrix
	in  []float32
	n   int
	// workers is how many workers share the units (unitBlock).
	workers int
	// sums is blockSums of the n inputs, for the types that take them
	// (needsSums).
	sums []float32
	// acts are the n inputs rounded for the integer kernels, per kind.
	acts  [actKinds]acts
	quant quantTask
	// acc is each worker's scratch for the prompt kernels' accumulators
	// (mulF32Prompt).
	acc [][]float32
}

func (t *matmulTask) Do(worker, i int) {
	m, n := t.m, t.n
	b := unitBlock(i, (m.Rows+matmulChunk-1)/matmulChunk, t.workers)
	lo, hi := b*matmulChunk, min((b+1)*matmulChunk, m.Rows)
	if k := actOf(m.Type); k != actNone {
		if m.pack != nil && packedFor(m.Type, n) {
			mulPacked(m, lo, hi, &t.acts[k], t.out[lo:], m.Rows)
			return
		}
		rb := m.Type.RowBytes(m.Cols)
		mulInt(m.Type, m.Raw[lo*rb:hi*rb], &t.acts[k], t.out[lo:], m.Rows)
		return
	}
	switch m.Type {
	case F32:
		mulF32Prompt(m.F[lo*m.Cols:hi*m.Cols], m.Cols, t.in, n, t.out[lo:], m.Rows, &t.acc[worker])
	case Q4_1, Q5_1, BF16:
		rb := m.Type.RowBytes(m.Cols)
		mulQuant(m.Type, m.Raw[lo*rb:hi*rb], m.Cols, t.in, n, t.out[lo:], m.Rows, t.sums)
	default:
		for o := lo; o < hi; o++ {
			for r := 0; r < n; r++ {
				t.out[r*m.Rows+o] = m.dotRow(o, t.in[r*m.Cols:(r+1)*m.Cols])
			}
		}
	}
}

// dot4 is dotBytes over float32s: four lanes by index mod 4, combined as
// (l0+l1)+(l2+l3).
func dot4(w, x []float32) float32 {
	w = w[:len(x)]
	var s0, s1, s2, s3 float32
	n := len(x) &^ 3
	for k := 0; k < n; k += 4 {
		ww, xx := w[k:k+4:k+4], x[k:k+4:k+4]
		s0 += float32(ww[0] * xx[0])
		s1 += float32(ww[1] * xx[1])
		s2 += float32(ww[2] * xx[2])
		s3 += float32(ww[3] * xx[3])
	}
	for k := n; k < len(x); k++ {
		p := float32(w[k] * x[k])
		switch k & 3 {
		case 0:
			s0 += p
		case 1:
			s1 += p
		default:
			s2 += p
		}
	}
	return (s0 + s1) + (s2 + s3)
}

// dotBytes is dotF32 with w read from little-endian float32 bytes.
func dotBytes(b []byte, x []float32) float32 {
	b = b[:4*len(x)]
	var s0, s1, s2, s3 float32
	n := len(x) &^ 3
	for k := 0; k < n; k += 4 {
		bb, xx := b[4*k:4*k+16:4*k+16], x[k:k+4:k+4]
		s0 += float32(math.Float32frombits(binary.LittleEndian.Uint32(bb[0:])) * xx[0])
		s1 += float32(math.Float32frombits(binary.LittleEndian.Uint32(bb[4:])) * xx[1])
		s2 += float32(math.Float32frombits(binary.LittleEndian.Uint32(bb[8:])) * xx[2])
		s3 += float32(math.Float32frombits(binary.LittleEndian.Uint32(bb[12:])) * xx[3])
	}
	for k := n; k < len(x); k++ {
		p := float32(math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:])) * x[k])
		switch k & 3 {
		case 0:
			s0 += p
		case 1:
			s1 += p
		default:
			s2 += p
		}
	}
	return (s0 + s1) + (s2 + s3)
}

// Logits are the logits of the j-th sampling sequence (in batch order) of
// the last Execute, VocabSize of them. The slice is the executor's: valid
// until the next Execute. Tests use it to compare the forward pass with a
// reference.
func (e *Executor) Logits(j int) []float32 {
	v := e.cfg.VocabSize
	return e.logits[j*v : (j+1)*v]
}
