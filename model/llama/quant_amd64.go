package llama

// The quantised kernels (quant_amd64.s): rows consecutive rows of nblocks
// blocks times one vector (x1)
// or four consecutive vectors (x4); sums is blockSums of those vectors
// (read by the types with minimums, needsSums).

//go:noescape
func dotQ41x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)

//go:noescape
func dotQ41x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)

//go:noescape
func dotQ51x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)

//go:noescape
func dotQ51x4AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)

//go:noescape
func dotBF16x1AVX2(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)

type quantKernels struct {
	x1 func(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32)
	x4 func(raw *byte, rows, nblocks int, x *float32, sums *float32, out *float32, outStride int)
}

// kernels are the vector kernels of the types that have them.
var kernels = map[Type]quantKernels{
	Q4_1: {dotQ41x1AVX2, dotQ41x4AVX2},
	Q5_1: {dotQ51x1AVX2, dotQ51x4AVX2},
	BF16: {dotBF16x1AVX2, nil}, // widths that are a multiple of 32; one vector at a time
}

// dotQuant is dotQuantGeneric with the type's vector kernel where the CPU
// has AVX2 and FMA: the same bits.
func dotQuant(t Type, raw []byte, x []float32) float32 {
	var out [1]float32
	var buf [64]float32
	var sums []float32
	if needsSums(t) {
		sums = blockSums(buf[:0], x, len(x), 1)
	}
	mulQuant(t, raw, len(x), x, 1, out[:], 1, sums)
	return out[0]
}

// mulQuant is mulQuantGeneric with the type's vector kernels where the CPU
// has AVX2 and FMA: the same bits. Each row is applied to four vectors at
// a time, then to the rest one at a time (BF16: every vector one at a
// time, the rows of a unit of work staying in cache). sums is blockSums of x for the
// types that take it (needsSums). The kernels check nothing, so the bounds
// are checked here, before they run.
func mulQuant(t Type, raw []byte, cols int, x []float32, n int, out []float32, stride int, sums []float32) {
	k, ok := kernels[t]
	rb := t.RowBytes(cols)
	rows := len(raw) / rb
	if !hasAVX2FMA || !ok || rows == 0 || n == 0 || t == BF16 && cols%32 != 0 {
		mulQuantGeneric(t, raw, cols, x, n, out, stride)
		return
	}
	_, _ = x[n*cols-1], out[(n-1)*stride+rows-1]
	nb := cols / t.Block()
	var sp *float32
	if needsSums(t) {
		_ = sums[n*cols/32-1]
		sp = &sums[0]
	} else {
		sp = &x[0] // unused
	}
	r := 0
	for ; k.x4 != nil && r+4 <= n; r += 4 {
		if needsSums(t) {
			sp = &sums[r*cols/32]
		}
		k.x4(&raw[0], rows, nb, &x[r*cols], sp, &out[r*stride], stride)
	}
	for ; r < n; r++ {
		if needsSums(t) {
			sp = &sums[r*cols/32]
		}
		k.x1(&raw[0], rows, nb, &x[r*cols], sp, &out[r*stride])
	}
}
