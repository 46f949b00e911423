package llama

import "unsafe"

// Packed rows. The file keeps each row's blocks together, so a register
// holds one row: the K-quant kernels unpack every row's twelve bytes of 6-bit scales and minimums
// with scalar shifts and masks, and every kernel sums eight lanes per row
// (and block) where the rule wants one integer (doc.go). Pack
// copies a Q4_K matrix whose rows are a multiple of groupRows into groups
// of eight rows, per group and super-block one block of q4kPackBytes:
//
//	[0:16)     d of rows 0-7 (float16 each, as in the file)
//	[16:32)    dmin of rows 0-7
//	[32:96)    the scales: sub-block k's eight rows at 32+8k (bytes, < 64)
//	[96:160)   the minimums: for pair q (sub-blocks 2q, 2q+1), row i's two
//	           at 96+16q+2i and +1
//	[160:1184) the quants: for pair p and chunk c (0-7), row i's four
//	           bytes 4c…4c+3 of the pair's 32 (low nibbles sub-block 2p,
//	           high 2p+1, as in the file) at 160+256p+32c+4i
//
// the groups in row order, each group's super-blocks in column order. So
// one 32-byte load is four quants of each of the eight rows: a register
// lane per row, which VPDPBUSD multiplies by four of an input's quants
// broadcast to every lane, and the rows' scales and minimums are one
// widening load each (packq4k_amd64.s). The kernels take one, four or
// eight inputs at a time, so every step reads this layout, prompts
// included. The bytes are the file's, rearranged (the 6-bit scales
// widened to bytes: 1,184 bytes per eight rows' super-block instead of
// 1,152), and the products are the same: the kernels compute each (row,
// input) in dotKInt's order, and the twin (mulPackedGeneric) unpacks a
// row back to the file's bytes and calls dotIntGeneric.
//
// Q5_K (read by one-input kernels, two rows per ZMM register) keeps each
// row's bytes together: q5kPackBytes (1,440 per 1,408) per group and
// super-block, d and dmin as Q4_K's, row i's eight scales at 32+8i and
// minimums at 96+8i, its 32 bytes of high bits (byte l holds bit 4 of
// sub-block k's weight l at bit k, as in the file) at 160+32i, and its 32
// quant bytes of pair p at 416+256p+32i.
//
// Q6_K likewise, q6kPackBytes per group and super-block (eight rows'
// 1,680 bytes and 48 of padding, so that every 64-byte load of quants is
// one cache line; the loads in address order), with q_t the 6-bit quant
// of weight t (before the −32) and group c the weights 32c..32c+31:
//
//	[0:16)    d of rows 0-7 (float16)
//	[16:144)  the sixteen int8 scales of row i at 16+16i
//	[144:192) zero
//	[192:)    per pair of rows h, 384 bytes at 192+384h: six chunks of
//	          64 bytes (row 2h's 32, then 2h+1's): the high two bits of
//	          groups 0-3, of groups 4-7 (byte l those of group 4e+u's
//	          weight l at bits 2u, 2u+1), then for a < 4 the low four bits
//	          of groups 2a and 2a+1 (byte l group 2a's weight l in the
//	          low nibble, 2a+1's in the high)
//
// Q8_0, Q4_0 and Q5_0 (32-weight blocks) put eight rows' blocks together
// the same way, per group and block one block of q8PackBytes, q40PackBytes
// or q50PackBytes:
//
//	[0:16)   d of rows 0-7 (float16)
//	[16:48)  Q5_0 only: row i's 32 high bits (the file's qh) at 16+4i
//	[o:)     chunk c at o+32c (o = 16, Q5_0 48), row i's four bytes at
//	         o+32c+4i: Q8_0's quants 4c…4c+3 offset to unsigned (q+128,
//	         eight chunks), Q4_0's and Q5_0's bytes 4c…4c+3 of the file's
//	         sixteen (quants 4c… in the low nibbles, 16+4c… in the high
//	         ones; four chunks)
//
// so the kernels (packq8_amd64.s) take one lane per row as for Q4_K,
// without a scale per sub-block; the same bytes per row as the file's.
//
// The packed copy is taken where the CPU has a kernel for it (packKernel);
// Raw stays, for dotRow and for the steps of more than packMaxInputs
// inputs times Q5_K and Q6_K, which read the file's layout.
const (
	groupRows    = 8
	q4kPackBytes = 1184
	q5kPackBytes = 1440
	q6kPackBytes = 1728
	q8PackBytes  = 16 + 256
	q40PackBytes = 16 + 128
	q50PackBytes = 16 + 32 + 128
)

// packBytes is the bytes of a group's super-block packed (type t).
func packBytes(t Type) int {
	switch t {
	case Q6_K:
		return q6kPackBytes
	case Q5_K:
		return q5kPackBytes
	case Q8_0:
		return q8PackBytes
	case Q4_0:
		return q40PackBytes
	case Q5_0:
		return q50PackBytes
	}
	return q4kPackBytes
}

// packable reports whether m has a packed layout with a kernel on this
// CPU.
func (m *Matrix) packable() bool {
	return (m.Type == Q4_K || m.Type == Q5_K || m.Type == Q6_K || m.Type == Q8_0 || m.Type == Q4_0 || m.Type == Q5_0) && m.Rows%groupRows == 0 && m.Rows > 0 && packKernel(m.Type, 1) != nil
}

// packed lists the matrices of w that Pack packs, each once (Output may
// be a layer's matrix only by aliasing Embedding, which is not packed).
func (w *Weights) packed() []*Matrix {
	ms := []*Matrix{&w.Output}
	for i := range w.Layers {
		l := &w.Layers[i]
		ms = append(ms, &l.Wq, &l.Wk, &l.Wv, &l.Wo, &l.W1, &l.W2, &l.W3)
	}
	var out []*Matrix
	for _, m := range ms {
		if m.packable() && m.pack == nil {
			out = append(out, m)
		}
	}
	return out
}

// packSize is m's packed bytes rounded up to whole cache lines.
func (m *Matrix) packSize() int {
	return (m.Rows/groupRows*m.Cols/m.Type.Block()*packBytes(m.Type) + 63) &^ 63
}

// PackSize is the bytes Pack needs: 0 when no matrix of w has a faster
// kernel over packed rows on this CPU.
func (w *Weights) PackSize() int {
	n := 0
	for _, m := range w.packed() {
		n += m.packSize()
	}
	return n
}

// Pack gives every matrix of w that has a faster kernel over packed rows
// on this CPU (Q4_K, Q5_K, Q6_K, Q8_0 and Q4_0 with AVX512-VNNI, rows a
// multiple of eight) a packed copy of its rows in buf (PackSize zeroed
// bytes, 64-byte aligned; nil: Pack allocates them), which every step
// then reads (Q5_K and Q6_K: steps of one to three inputs); the other
// matrices and other CPUs are left as they are. The copy is beside Raw
// (2.9% more bytes than the rows for Q6_K, 2.8% for Q4_K, 2.3% for Q5_K,
// as many for Q8_0 and Q4_0), and Unread lists the rows no step reads
// any more. The results do not change: the packed kernels give the bits
// of the file's layout. Call it once, before the weights are shared; buf
// must outlive them. The edge that maps the file passes memory backed by
// huge pages where it can (model/llamafile): a decode step streams every
// weight, and with 4 KiB pages the TLB misses cost TinyLlama's decode
// 12–19% (docs/benchmarks.md).
func (w *Weights) Pack(buf []byte) {
	ms := w.packed()
	if buf == nil {
		buf = make([]byte, w.PackSize())
	}
	for _, m := range ms {
		n := m.packSize()
		m.pack = packMatrix(m.Type, m.Raw, m.Rows, m.Cols, buf[:n:n])
		buf = buf[n:]
	}
}

// Unread lists the rows (Raw) that no step reads once Pack has run: those
// of the matrices whose packed copy takes every step (packedFor), unless
// they are also the embedding's. The edge that mapped them may return
// their memory to the system (model/llamafile): with Q8_0 and Q4_0 the
// copy is as large as the rows.
func (w *Weights) Unread() [][]byte {
	var out [][]byte
	seen := map[*byte]bool{}
	if len(w.Embedding.Raw) > 0 {
		seen[&w.Embedding.Raw[0]] = true
	}
	ms := []*Matrix{&w.Output}
	for i := range w.Layers {
		l := &w.Layers[i]
		ms = append(ms, &l.Wq, &l.Wk, &l.Wv, &l.Wo, &l.W1, &l.W2, &l.W3)
	}
	for _, m := range ms {
		if m.pack == nil || len(m.Raw) == 0 || seen[&m.Raw[0]] || packKernel(m.Type, 8) == nil {
			continue
		}
		seen[&m.Raw[0]] = true
		out = append(out, m.Raw)
	}
	return out
}

// packMatrix writes rows rows (a multiple of groupRows) of cols of type t
// (Q4_K, Q5_K, Q6_K, Q8_0, Q4_0 or Q5_0) in the packed layout to out (zeroed, at
// least as long), and returns the bytes written.
func packMatrix(t Type, raw []byte, rows, cols int, out []byte) []byte {
	nb := cols / t.Block()
	bb, pb := t.BlockBytes(), packBytes(t)
	rb := nb * bb
	out = out[:rows/groupRows*nb*pb]
	for g := 0; g < rows/groupRows; g++ {
		for b := 0; b < nb; b++ {
			p := out[(g*nb+b)*pb : (g*nb+b+1)*pb]
			for i := 0; i < groupRows; i++ {
				blk := raw[(g*groupRows+i)*rb+b*bb : (g*groupRows+i)*rb+(b+1)*bb]
				switch t {
				case Q6_K:
					packQ6K(blk, p, i)
				case Q8_0, Q4_0, Q5_0:
					packQ32(t, blk, p, i)
				default:
					packK(t, blk, p, i)
				}
			}
		}
	}
	return out
}

// packK puts the Q4_K or Q5_K super-block blk as row i of the packed
// block p.
func packK(t Type, blk, p []byte, i int) {
	copy(p[2*i:2*i+2], blk[0:2])
	copy(p[16+2*i:16+2*i+2], blk[2:4])
	sc, mn := kScales(blk[4:16])
	if t == Q4_K {
		for k := 0; k < 8; k++ {
			p[32+8*k+i] = sc[k]
			p[96+16*(k>>1)+2*i+k&1] = mn[k]
		}
		for q := 0; q < 4; q++ {
			for c := 0; c < 8; c++ {
				copy(p[q4kQuants(q, c, i):][:4], blk[16+32*q+4*c:][:4])
			}
		}
		return
	}
	copy(p[32+8*i:40+8*i], sc[:])
	copy(p[96+8*i:104+8*i], mn[:])
	copy(p[160+32*i:192+32*i], blk[16:48])
	for q := 0; q < 4; q++ {
		copy(p[416+256*q+32*i:416+256*q+32*i+32], blk[48+32*q:48+32*q+32])
	}
}

// packQ32 puts the Q8_0, Q4_0 or Q5_0 block blk as row i of the packed
// block p; unpackQ32 is its inverse.
func packQ32(t Type, blk, p []byte, i int) {
	copy(p[2*i:2*i+2], blk[0:2])
	q, o := q32Quants(t)
	if t == Q5_0 {
		copy(p[16+4*i:20+4*i], blk[2:6])
	}
	for c := 0; c < (len(p)-o)/32; c++ {
		for j := 0; j < 4; j++ {
			v := blk[q+4*c+j]
			if t == Q8_0 {
				v ^= 0x80
			}
			p[o+32*c+4*i+j] = v
		}
	}
}

func unpackQ32(t Type, p []byte, i int, blk []byte) {
	copy(blk[0:2], p[2*i:2*i+2])
	q, o := q32Quants(t)
	if t == Q5_0 {
		copy(blk[2:6], p[16+4*i:20+4*i])
	}
	for c := 0; c < (len(p)-o)/32; c++ {
		for j := 0; j < 4; j++ {
			v := p[o+32*c+4*i+j]
			if t == Q8_0 {
				v ^= 0x80
			}
			blk[q+4*c+j] = v
		}
	}
}

// q32Quants is where the quant bytes of a type t block start in the file
// (q) and in the packed block (o).
func q32Quants(t Type) (q, o int) {
	if t == Q5_0 {
		return 6, 48
	}
	return 2, 16
}

// q4kQuants is the offset of row i's four quant bytes 32q+4c…32q+4c+3
// (pair q, chunk c) in a packed Q4_K block.
func q4kQuants(q, c, i int) int { return 160 + 256*q + 32*c + 4*i }

// packQ6K puts the Q6_K super-block blk as row i of the packed block p.
func packQ6K(blk, p []byte, i int) {
	copy(p[2*i:2*i+2], blk[208:210])
	copy(p[16+16*i:32+16*i], blk[192:208])
	for c := 0; c < 8; c++ {
		// group c's weight l: its low bits in the file at byte
		// 64(c/4) + 32(c%2) + l, bits 4((c/2)%2)…; its high two at byte
		// 128 + 32(c/4) + l, bits 2(c%4)… (q6).
		ql := blk[64*(c>>2)+32*(c&1):][:32]
		qh := blk[128+32*(c>>2):][:32]
		lo := p[q6Bits(2+c>>1, i):][:32]
		hi := p[q6Bits(c>>2, i):][:32]
		ls, hs := 4*(c>>1&1), 2*(c&3)
		for l := range lo {
			lo[l] |= ql[l] >> ls & 15 << (4 * (c & 1))
			hi[l] |= qh[l] >> hs & 3 << hs
		}
	}
}

// q6Bits is the offset of row i's 32 bytes of chunk k in a packed Q6_K
// block: the high bits of groups 0-3 (k 0) and 4-7 (k 1), the low bits of
// groups 2a and 2a+1 (k 2+a).
func q6Bits(k, i int) int { return 192 + 384*(i>>1) + 64*k + 32*(i&1) }

// unpackQ6K is packQ6K's inverse: row i of packed block p into blk (the
// file's 210 bytes).
func unpackQ6K(p []byte, i int, blk []byte) {
	clear(blk[:192])
	copy(blk[208:210], p[2*i:2*i+2])
	copy(blk[192:208], p[16+16*i:32+16*i])
	for t := 0; t < qkK; t++ {
		c, l := t>>5, t&31
		q := p[q6Bits(2+c>>1, i)+l]>>(4*(c&1))&15 | (p[q6Bits(c>>2, i)+l]>>(2*(c&3))&3)<<4
		h, r := t>>7, t&127
		blk[64*h+r&63] |= q & 15 << (4 * (r >> 6))
		blk[128+32*h+r&31] |= q >> 4 << (2 * (r >> 5))
	}
}

// unpackRow writes row i (< groupRows) of group block p (nb super-blocks
// of type t packed) in the file's layout into row (nb blocks).
func unpackRow(t Type, p []byte, i, nb int, row []byte) {
	bb, pb := t.BlockBytes(), packBytes(t)
	for b := 0; b < nb; b++ {
		s := p[b*pb : (b+1)*pb]
		blk := row[b*bb : (b+1)*bb]
		switch t {
		case Q6_K:
			unpackQ6K(s, i, blk)
			continue
		case Q8_0, Q4_0, Q5_0:
			unpackQ32(t, s, i, blk)
			continue
		}
		copy(blk[0:2], s[2*i:2*i+2])
		copy(blk[2:4], s[16+2*i:16+2*i+2])
		var sc, mn [8]byte
		for k := range sc {
			if t == Q4_K {
				sc[k], mn[k] = s[32+8*k+i], s[96+16*(k>>1)+2*i+k&1]
			} else {
				sc[k], mn[k] = s[32+8*i+k], s[96+8*i+k]
			}
		}
		for k := 0; k < 4; k++ {
			blk[4+k] = sc[k] | sc[4+k]>>4<<6
			blk[8+k] = mn[k] | mn[4+k]>>4<<6
			blk[12+k] = sc[4+k]&15 | mn[4+k]<<4
		}
		if t == Q4_K {
			for q := 0; q < 4; q++ {
				for c := 0; c < 8; c++ {
					copy(blk[16+32*q+4*c:][:4], s[q4kQuants(q, c, i):][:4])
				}
			}
			continue
		}
		copy(blk[16:48], s[160+32*i:192+32*i])
		for q := 0; q < 4; q++ {
			copy(blk[48+32*q:48+32*q+32], s[416+256*q+32*i:416+256*q+32*i+32])
		}
	}
}

// mulPackedGeneric is mulIntGeneric over the packed rows lo..hi-1 (lo and
// hi multiples of groupRows) of m: out[r·stride + i−lo] for rows i and
// inputs r < a.n. Each row is unpacked to the file's bytes and multiplied
// by dotIntGeneric: the twin of the packed kernels.
func mulPackedGeneric(m *Matrix, lo, hi int, a *acts, out []float32, stride int) {
	nb, pb := m.Cols/m.Type.Block(), packBytes(m.Type)
	row := make([]byte, nb*m.Type.BlockBytes())
	for g := lo / groupRows; g < hi/groupRows; g++ {
		p := m.pack[g*nb*pb : (g+1)*nb*pb]
		for i := 0; i < groupRows; i++ {
			unpackRow(m.Type, p, i, nb, row)
			for r := 0; r < a.n; r++ {
				out[r*stride+g*groupRows+i-lo] = dotIntGeneric(m.Type, row, a, r)
			}
		}
	}
}

// mulPacked is mulPackedGeneric with the packed kernels (packKernel):
// eight inputs at a time where the type has such a kernel, then four,
// then one; a row group's weights stay in cache for the next inputs. The
// bounds are checked here; the kernels check nothing.
func mulPacked(m *Matrix, lo, hi int, a *acts, out []float32, stride int) {
	nb := m.Cols / m.Type.Block()
	n := a.n
	if lo == hi || n == 0 {
		return
	}
	pb := packBytes(m.Type)
	p := m.pack[lo/groupRows*nb*pb : hi/groupRows*nb*pb]
	_ = out[(n-1)*stride+hi-lo-1]
	_, _ = a.q[n*a.cols-1], a.d[n*nb-1]
	if a.kind == actQ8K {
		_, _ = a.bs[16*n*nb-1], a.bp[8*n*nb-1]
	} else {
		_ = a.ob[n*nb-1]
	}
	for r := 0; r < n; {
		for _, w := range [...]int{8, 4, 1} {
			k := packKernel(m.Type, w)
			if k == nil || r+w > n {
				continue
			}
			var sums unsafe.Pointer
			switch m.Type {
			case Q4_K:
				sums = unsafe.Pointer(&a.bp[8*r*nb])
			case Q8_0, Q4_0, Q5_0:
				sums = unsafe.Pointer(&a.ob[r*nb])
			default:
				sums = unsafe.Pointer(&a.bs[16*r*nb])
			}
			k(&p[0], (hi-lo)/groupRows, nb, &a.q[r*a.cols], &a.d[r*nb], sums, &out[r*stride], stride)
			r += w
			break
		}
	}
}

// packedFor reports whether a step of n inputs multiplies type t's packed
// rows: any step where t has an eight-input packed kernel (Q4_K), else
// steps of at most packMaxInputs (more take the file's layout and the
// multi-input kernels).
func packedFor(t Type, n int) bool {
	return packKernel(t, 1) != nil && (n <= packMaxInputs || packKernel(t, 8) != nil)
}

// packMaxInputs is the most inputs a step multiplies by packed rows of
// a type without an eight-input packed kernel.
const packMaxInputs = 3
