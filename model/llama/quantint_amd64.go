package llama

// The integer kernels (quantint_amd64.s): rows consecutive rows of
// nblocks blocks times input 0 (x1) or inputs 0-3 (x4) of the rounded
// inputs at xq, xd, bs.

//go:noescape
func dotQ8Ix1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ8Ix4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

type intKernel func(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

// intKernels are the integer kernels of each type: one input, four.
var intKernels = map[Type][2]intKernel{
	Q8_0: {dotQ8Ix1AVX2, dotQ8Ix4AVX2},
}

// mulInt is mulIntGeneric with the vector kernels where the CPU has AVX2
// (and FMA): the same bits. Each row is applied to four inputs at a time,
// then to the rest one at a time. The kernels check nothing, so the
// bounds are checked here, before they run.
func mulInt(t Type, raw []byte, a *acts, out []float32, stride int) {
	k, ok := intKernels[t]
	rb := t.RowBytes(a.cols)
	rows := len(raw) / rb
	n := a.n
	if !hasAVX2FMA || !ok || rows == 0 || n == 0 {
		mulIntGeneric(t, raw, a, out, stride)
		return
	}
	_ = out[(n-1)*stride+rows-1]
	nb := a.cols / a.kind.block()
	_, _ = a.q[n*a.cols-1], a.d[n*nb-1]
	var bs *int16
	if a.kind == actQ8K {
		_ = a.bs[16*n*nb-1]
	}
	call := func(k intKernel, r int) {
		if a.kind == actQ8K {
			bs = &a.bs[16*r*nb]
		}
		k(&raw[0], rows, nb, &a.q[r*a.cols], &a.d[r*nb], bs, &out[r*stride], stride)
	}
	r := 0
	for ; r+4 <= n; r += 4 {
		call(k[1], r)
	}
	for ; r < n; r++ {
		call(k[0], r)
	}
}
