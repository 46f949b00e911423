//go:build amd64 || arm64

package llama

// mulIntWith is mulInt's walk with the kernels k (one input, four; nil
// for a type with one-input kernels only) over the rows rows of raw: each
// row applied to four inputs at a time, then to the rest one at a time. The kernels check nothing, so the bounds are
// checked here, before they run.
func mulIntWith(k [2]intKernel, rows int, raw []byte, a *acts, out []float32, stride int) {
	n := a.n
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
	for ; k[1] != nil && r+4 <= n; r += 4 {
		call(k[1], r)
	}
	for ; r < n; r++ {
		call(k[0], r)
	}
}
