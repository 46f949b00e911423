package llama

import (
	"encoding/binary"
	"math"
)

// attnTask is attention: per (row, query head), scores against every
// earlier position's key read from the pool, softmax, and the weighted sum
// of the values read from the pool, into e.xo. A unit is up to attnRows
// consecutive rows of one sequence and one kv head with its group of query
// heads: every key and value it reads from a block of the pool serves all
// of them while the block is in cache (a prompt's rows share their keys).
// A slot is BytesPerToken apart from the next, too far for the
// prefetcher, and a prompt chunk's units each read all its keys: for a
// sequence of packRows rows or more the layer's keys and values are first
// copied out of the pool, contiguous per kv head (pack), and its units
// read them there. Each (row, head)'s scores, softmax and sum are the same
// operations on the same numbers in the same order as for one row alone.
type attnTask struct {
	e     *Executor
	units []attnUnit
	rows  int // rows per unit
	need  int // scores per (row, head): the longest context
	// qpack is each worker's queries packed for scores4, qpackLen
	// floats per worker.
	qpack    []float32
	qpackLen int
	// kv holds, for each sequence of the batch with at least packRows
	// rows in the step (a prompt chunk), this layer's keys and values of
	// its positions 0..last copied out of the pool, contiguous per kv head
	// (packKV): its units read them there, head dim floats apart, instead
	// of a slot apart in the pool. at[i] is sequence i's offset in kv, or
	// -1 when it reads the pool.
	kv    []float32
	at    []int
	packN []int // positions packed, per sequence (with at[i] ≥ 0)
	packs []attnPack
}

// attnPack is sequence seq's keys and values of positions 0..n-1, kv head
// g, to copy into kv at off (keys) and off + n·hd (values).
type attnPack struct{ seq, g, n, off int }

// packRows is the fewest rows of a sequence in a step for which attention
// copies its keys and values out of the pool first: every unit of the
// sequence reads all of them, so a prompt chunk reads each many times.
const packRows = 2 * attnRows

// attnUnit is rows r0..r1-1 (one sequence's) and kv head g.
type attnUnit struct{ r0, r1, g int }

// attnRows bounds the rows of an attention unit; attnScratch bounds a
// worker's scores (float32s): longer contexts take fewer rows per unit.
const (
	attnRows    = 8
	attnScratch = 1 << 20
)

func (t *attnTask) run() {
	e := t.e
	// Sized for the longest context the model takes (a step allocates
	// nothing once the buffers have grown), longer if a row is beyond it.
	t.need = e.cfg.MaxSeqLen + 1
	for r := 0; r < e.n; r++ {
		t.need = max(t.need, e.rowPos[r]+1)
	}
	t.rows = max(1, min(attnRows, attnScratch/(e.group*t.need)))
	t.units = t.units[:0]
	for r0 := 0; r0 < e.n; {
		r1 := r0 + 1
		for r1 < e.n && r1-r0 < t.rows && e.rowSeq[r1] == e.rowSeq[r0] {
			r1++
		}
		for g := 0; g < e.cfg.KVHeads; g++ {
			t.units = append(t.units, attnUnit{r0, r1, g})
		}
		r0 = r1
	}
	w := e.run.Workers()
	e.scores = grow(e.scores, w*t.rows*e.group*t.need)
	t.qpackLen = t.rows * e.group * e.hd
	t.qpack = grow(t.qpack, w*t.qpackLen)
	t.pack()
	e.run.Run(len(t.units), t)
}

// pack copies the keys and values of the sequences with packRows rows or
// more into t.kv (see attnTask.kv), one kv head of one sequence per unit
// of parallel work. The values are the pool's bits: the scores and sums
// read from there are the same operations on the same numbers.
func (t *attnTask) pack() {
	e := t.e
	t.at, t.packN = t.at[:0], t.packN[:0]
	t.packs = t.packs[:0]
	if !e.viewKV {
		return
	}
	size := 0
	for r0 := 0; r0 < e.n; {
		i := e.rowSeq[r0]
		r1 := r0 + 1
		for r1 < e.n && e.rowSeq[r1] == i {
			r1++
		}
		for len(t.at) <= i {
			t.at = append(t.at, -1)
			t.packN = append(t.packN, 0)
		}
		if r1-r0 >= packRows {
			n := e.rowPos[r1-1] + 1
			t.at[i], t.packN[i] = size, n
			for g := 0; g < e.cfg.KVHeads; g++ {
				t.packs = append(t.packs, attnPack{seq: i, g: g, n: n, off: size + 2*g*n*e.hd})
			}
			size += 2 * n * e.kvDim
		}
		r0 = r1
	}
	if len(t.packs) == 0 {
		return
	}
	t.kv = grow(t.kv, size)
	e.run.Run(len(t.packs), (*attnPackTask)(t))
}

// attnPackTask runs attnTask.packs.
type attnPackTask attnTask

func (p *attnPackTask) Do(_, i int) {
	e := p.e
	u := p.packs[i]
	s := &e.batch.Seqs[u.seq]
	kOff, vOff := e.kvOffset(e.layer, 0, u.g)/4, e.kvOffset(e.layer, 1, u.g)/4
	bs, slotFloats, hd := e.blockSize, e.cfg.BytesPerToken()/4, e.hd
	k := p.kv[u.off : u.off+u.n*hd]
	v := p.kv[u.off+u.n*hd : u.off+2*u.n*hd]
	for b0 := 0; b0 < u.n; b0 += bs {
		blk := viewF32(e.pool.Bytes(s.Blocks[b0/bs]))
		for pos := b0; pos < min(b0+bs, u.n); pos++ {
			slot := (pos - b0) * slotFloats
			copy(k[pos*hd:(pos+1)*hd], blk[slot+kOff:slot+kOff+hd])
			copy(v[pos*hd:(pos+1)*hd], blk[slot+vOff:slot+vOff+hd])
		}
	}
}

func (t *attnTask) Do(worker, i int) {
	e := t.e
	u := t.units[i]
	s := &e.batch.Seqs[e.rowSeq[u.r0]]
	per := t.rows * e.group * t.need
	scratch := e.scores[worker*per : (worker+1)*per]
	// sc is the scores of row r, head g·group+j.
	sc := func(r, j int) []float32 {
		return scratch[((r-u.r0)*e.group+j)*t.need:][:e.rowPos[r]+1]
	}
	q := func(r, j int) []float32 {
		h := u.g*e.group + j
		return e.q[r*e.qDim+h*e.hd : r*e.qDim+(h+1)*e.hd]
	}
	out := func(r, j int) []float32 {
		h := u.g*e.group + j
		return e.xo[r*e.qDim+h*e.hd : r*e.qDim+(h+1)*e.hd]
	}
	kOff, vOff := e.kvOffset(e.layer, 0, u.g), e.kvOffset(e.layer, 1, u.g)
	bs, slotFloats := e.blockSize, e.cfg.BytesPerToken()/4
	last := e.rowPos[u.r1-1]
	// keys and values of the block at b0: a slot apart in the pool, or
	// head dim floats apart in the sequence's pack.
	stride := slotFloats
	keys := func(b0 int) []float32 { return viewF32(e.pool.Bytes(s.Blocks[b0/bs]))[kOff/4:] }
	values := func(b0 int) []float32 { return viewF32(e.pool.Bytes(s.Blocks[b0/bs]))[vOff/4:] }
	if i := e.rowSeq[u.r0]; i < len(t.at) && t.at[i] >= 0 {
		n := t.packN[i]
		k := t.kv[t.at[i]+2*u.g*n*e.hd:][:n*e.hd]
		v := t.kv[t.at[i]+(2*u.g+1)*n*e.hd:][:n*e.hd]
		stride = e.hd
		keys = func(b0 int) []float32 { return k[b0*e.hd:] }
		values = func(b0 int) []float32 { return v[b0*e.hd:] }
	}
	if e.viewKV {
		// A block's slots are consecutive in the pool: one kernel call
		// per block and four queries (row, head) that take the same keys
		// of it (scores4, where the CPU has its kernel: hasTiles), or per
		// block and query (scores: the same bits).
		nq := (u.r1 - u.r0) * e.group // query qi is row u.r0 + qi/group, head qi%group
		n4 := 0                       // the queries scores4 takes, a multiple of 4
		if hasTiles {
			n4 = nq / 4 * 4
		}
		qp := t.qpack[worker*t.qpackLen:][:n4*e.hd]
		for qi := 0; qi+4 <= n4; qi += 4 {
			r, j := u.r0+qi/e.group, qi%e.group
			r3, j3 := u.r0+(qi+3)/e.group, (qi+3)%e.group
			packQueries4(qp[qi*e.hd:], q(r, j), q(u.r0+(qi+1)/e.group, (qi+1)%e.group), q(u.r0+(qi+2)/e.group, (qi+2)%e.group), q(r3, j3))
		}
		for b0 := 0; b0 <= last; b0 += bs {
			kb := keys(b0)
			qi := 0
			for ; qi+4 <= n4; qi += 4 {
				r, r3 := u.r0+qi/e.group, u.r0+(qi+3)/e.group
				end, end3 := min(b0+bs, e.rowPos[r]+1), min(b0+bs, e.rowPos[r3]+1)
				if end != end3 {
					break // the rest one by one
				}
				if b0 < end {
					scores4(scratch[qi*t.need+b0:], t.need, end-b0, kb, stride, qp[qi*e.hd:], e.hd)
				}
			}
			for ; qi < nq; qi++ {
				r, j := u.r0+qi/e.group, qi%e.group
				if end := min(b0+bs, e.rowPos[r]+1); b0 < end {
					scores(sc(r, j)[b0:end], kb, stride, q(r, j))
				}
			}
		}
	} else {
		hb := 4 * e.hd
		for r := u.r0; r < u.r1; r++ {
			for j := 0; j < e.group; j++ {
				x, qq := sc(r, j), q(r, j)
				for p := range x {
					x[p] = dotBytes(e.pool.SlotBytes(s.Blocks[p/bs], p%bs)[kOff:kOff+hb], qq)
				}
			}
		}
	}
	for r := u.r0; r < u.r1; r++ {
		for j := 0; j < e.group; j++ {
			softmaxScaled(sc(r, j), e.attScale)
			clear(out(r, j))
		}
	}
	if e.viewKV {
		for b0 := 0; b0 <= last; b0 += bs {
			vb := values(b0)
			for r := u.r0; r < u.r1; r++ {
				if end := min(b0+bs, e.rowPos[r]+1); b0 < end {
					for j := 0; j < e.group; j++ {
						wsum(out(r, j), sc(r, j)[b0:end], vb, stride)
					}
				}
			}
		}
		return
	}
	hb := 4 * e.hd
	for r := u.r0; r < u.r1; r++ {
		for j := 0; j < e.group; j++ {
			o := out(r, j)
			for p, a := range sc(r, j) {
				vb := e.pool.SlotBytes(s.Blocks[p/bs], p%bs)[vOff : vOff+hb]
				for d := range o {
					o[d] += float32(a * math.Float32frombits(binary.LittleEndian.Uint32(vb[4*d:])))
				}
			}
		}
	}
}

// softmaxScaled replaces the scores sc by softmax(sc · scale): each score
// scaled and rounded, exp32 of its difference from the largest, summed as
// expSumGeneric states, then each times the sum's inverse, rounded.
func softmaxScaled(sc []float32, scale float32) {
	// The largest in four running maxima (max's result does not depend on
	// the order: NaN if any is, +0 over −0): a chain a quarter as long.
	m0 := float32(math.Inf(-1))
	m1, m2, m3 := m0, m0, m0
	n4 := len(sc) &^ 3
	for p := 0; p < n4; p += 4 {
		s := sc[p : p+4 : p+4]
		s[0], s[1], s[2], s[3] = float32(s[0]*scale), float32(s[1]*scale), float32(s[2]*scale), float32(s[3]*scale)
		m0, m1, m2, m3 = max(m0, s[0]), max(m1, s[1]), max(m2, s[2]), max(m3, s[3])
	}
	for p := n4; p < len(sc); p++ {
		sc[p] = float32(sc[p] * scale)
		m0 = max(m0, sc[p])
	}
	mx := max(max(m0, m1), max(m2, m3))
	inv := 1 / expSum(sc, mx)
	for p, a := range sc {
		sc[p] = float32(a * inv)
	}
}

// scoresGeneric sets out[i] = dot4(k[i·stride:], q) for i < len(out): the
// attention scores of consecutive slots of a block (scores picks a vector
// kernel of the same order).
func scoresGeneric(out, k []float32, stride int, q []float32) {
	for i := range out {
		out[i] = dot4(k[i*stride:i*stride+len(q)], q)
	}
}

// wsumGeneric adds a[i]·v[i·stride + d] to out[d] for i = 0, 1, … in turn
// (the product rounded to float32, then added): values weighted by their
// attention in position order. wsum picks a vector kernel; each element's
// sum is the same sequence of operations whatever the vector width.
func wsumGeneric(out, a, v []float32, stride int) {
	for i, ai := range a {
		vi := v[i*stride : i*stride+len(out)]
		for d := range out {
			out[d] += float32(ai * vi[d])
		}
	}
}
