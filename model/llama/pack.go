package llama

// Packed Q4_K rows. A decode step multiplies every weight by one input, so
// its cost per weight byte is what counts: Q4_K's row-by-row layout makes
// the one-input kernel unpack each super-block's twelve bytes of 6-bit
// scales and minimums with scalar shifts and masks, per row. Pack copies a
// Q4_K matrix whose rows are a multiple of groupRows into groups of eight
// rows, per group and super-block one block of q4kPackBytes:
//
//	[0:16)     d of rows 0-7 (float16 each, as in the file)
//	[16:32)    dmin of rows 0-7
//	[32:96)    the sub-block scales: row i's eight at 32+8i (bytes, < 64)
//	[96:160)   the minimums: row i's eight at 96+8i
//	[160:1184) the quants: for pair p (sub-blocks 2p, 2p+1) and row i, the
//	           row's 32 bytes of that pair at 160+256p+32i (low nibbles
//	           sub-block 2p, high 2p+1, as in the file)
//
// the groups in row order, each group's super-blocks in column order. So
// a vector kernel reads two rows' 64 quant bytes of a pair with one load,
// the eight rows' scales of a super-block without any bit unpacking, and
// the eight rows' d and dmin with one conversion each. The bytes are the
// file's, rearranged (the 6-bit scales widened to bytes: 1,184 bytes per
// eight rows' super-block instead of 1,152), and the products are the
// same: the packed kernel computes each (row, input) in the order of
// dotKInt, and its twin (dotQ4KPacked) unpacks a row back to the file's
// bytes and calls dotIntGeneric.
//
// The packed copy is taken where the CPU has a kernel for it (packKernel);
// Raw stays, for the multi-input prompt kernels and dotRow, which read the
// file's layout.
const (
	groupRows    = 8
	q4kPackBytes = 1184
)

// packable reports whether m has a packed layout with a kernel on this
// CPU.
func (m *Matrix) packable() bool {
	return m.Type == Q4_K && m.Rows%groupRows == 0 && m.Rows > 0 && packKernel(m.Type) != nil
}

// Pack gives every matrix of w that has a faster kernel over packed rows
// on this CPU (Q4_K with AVX512-VNNI, rows a multiple of eight) a packed
// copy of its rows, which one- and few-input products then read; the
// other matrices and other CPUs are left as they are. The copy is heap
// memory beside Raw (2.8% more bytes than the packed rows' Raw). The
// results do not change: the packed kernel gives the bits of the file's
// layout. Call it once, before the weights are shared.
func (w *Weights) Pack() {
	ms := []*Matrix{&w.Output}
	for i := range w.Layers {
		l := &w.Layers[i]
		ms = append(ms, &l.Wq, &l.Wk, &l.Wv, &l.Wo, &l.W1, &l.W2, &l.W3)
	}
	for _, m := range ms {
		if m.packable() && m.pack == nil {
			m.pack = packQ4K(m.Raw, m.Rows, m.Cols)
		}
	}
}

// packQ4K is rows Q4_K rows (a multiple of groupRows) of cols in the
// packed layout.
func packQ4K(raw []byte, rows, cols int) []byte {
	nb := cols / qkK
	rb := nb * 144
	out := make([]byte, rows/groupRows*nb*q4kPackBytes)
	for g := 0; g < rows/groupRows; g++ {
		for b := 0; b < nb; b++ {
			p := out[(g*nb+b)*q4kPackBytes : (g*nb+b+1)*q4kPackBytes]
			for i := 0; i < groupRows; i++ {
				blk := raw[(g*groupRows+i)*rb+b*144 : (g*groupRows+i)*rb+(b+1)*144]
				copy(p[2*i:2*i+2], blk[0:2])
				copy(p[16+2*i:16+2*i+2], blk[2:4])
				sc, mn := kScales(blk[4:16])
				copy(p[32+8*i:40+8*i], sc[:])
				copy(p[96+8*i:104+8*i], mn[:])
				for q := 0; q < 4; q++ {
					copy(p[160+256*q+32*i:160+256*q+32*i+32], blk[16+32*q:48+32*q])
				}
			}
		}
	}
	return out
}

// unpackQ4KRow writes row i (< groupRows) of group block p (nb super-blocks
// of q4kPackBytes) in the file's layout into row (nb·144 bytes).
func unpackQ4KRow(p []byte, i, nb int, row []byte) {
	for b := 0; b < nb; b++ {
		s := p[b*q4kPackBytes : (b+1)*q4kPackBytes]
		blk := row[b*144 : (b+1)*144]
		copy(blk[0:2], s[2*i:2*i+2])
		copy(blk[2:4], s[16+2*i:16+2*i+2])
		sc, mn := s[32+8*i:40+8*i], s[96+8*i:104+8*i]
		for k := 0; k < 4; k++ {
			blk[4+k] = sc[k] | sc[4+k]>>4<<6
			blk[8+k] = mn[k] | mn[4+k]>>4<<6
			blk[12+k] = sc[4+k]&15 | mn[4+k]<<4
		}
		for q := 0; q < 4; q++ {
			copy(blk[16+32*q:48+32*q], s[160+256*q+32*i:160+256*q+32*i+32])
		}
	}
}

// mulPackedGeneric is mulIntGeneric over the packed rows lo..hi-1 (lo and
// hi multiples of groupRows) of m: out[r·stride + i−lo] for rows i and
// inputs r < a.n. Each row is unpacked to the file's bytes and multiplied
// by dotIntGeneric: the twin of the packed kernels.
func mulPackedGeneric(m *Matrix, lo, hi int, a *acts, out []float32, stride int) {
	nb := m.Cols / qkK
	row := make([]byte, nb*144)
	for g := lo / groupRows; g < hi/groupRows; g++ {
		p := m.pack[g*nb*q4kPackBytes : (g+1)*nb*q4kPackBytes]
		for i := 0; i < groupRows; i++ {
			unpackQ4KRow(p, i, nb, row)
			for r := 0; r < a.n; r++ {
				out[r*stride+g*groupRows+i-lo] = dotIntGeneric(m.Type, row, a, r)
			}
		}
	}
}

// mulPacked is mulPackedGeneric with the packed kernel (packKernel), one
// input at a time: a row group's weights stay in cache for the next
// input. The bounds are checked here; the kernel checks nothing.
func mulPacked(m *Matrix, lo, hi int, a *acts, out []float32, stride int) {
	k := packKernel(m.Type)
	nb := m.Cols / qkK
	n := a.n
	if lo == hi || n == 0 {
		return
	}
	p := m.pack[lo/groupRows*nb*q4kPackBytes : hi/groupRows*nb*q4kPackBytes]
	_ = out[(n-1)*stride+hi-lo-1]
	_, _, _ = a.q[n*a.cols-1], a.d[n*nb-1], a.bs[16*n*nb-1]
	for r := 0; r < n; r++ {
		k(&p[0], (hi-lo)/groupRows, nb, &a.q[r*a.cols], &a.d[r*nb], &a.bs[16*r*nb], &out[r*stride])
	}
}

// packMaxInputs is the most inputs a step multiplies by packed rows; more
// take the file's layout and the multi-input kernels.
const packMaxInputs = 3
