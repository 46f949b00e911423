//go:build amd64 || arm64

package llama

import "unsafe"

// mulIntWith is mulInt's walk with the kernels k (one input, four; nil
// for a type with one-input kernels only) and k8 (eight inputs; nil where
// there is none) over the rows rows of raw: each row applied to eight
// inputs at a time, then four, then the rest one at a time. With offset,
// the four- and eight-input kernels take actQ8's offset quants and
// transposed scales (acts.u, acts.dt). Every kernel performs each
// input's operations in the same order, so an output does not depend on
// which kernel produced it. The kernels check nothing, so the bounds are
// checked here, before they run.
func mulIntWith(k [2]intKernel, k8 intKernel, offset bool, rows int, raw []byte, a *acts, out []float32, stride int) {
	n := a.n
	_ = out[(n-1)*stride+rows-1]
	nb := a.cols / a.kind.block()
	_, _ = a.q[n*a.cols-1], a.d[n*nb-1]
	var bs *int16
	if a.kind == actQ8K {
		_ = a.bs[16*n*nb-1]
	}
	if offset {
		_, _ = a.u[(n+7)/8*8*a.cols-1], a.dt[(n+7)/8*8*nb-1]
	}
	call := func(k intKernel, r int) {
		if a.kind == actQ8K {
			bs = &a.bs[16*r*nb]
		}
		k(&raw[0], rows, nb, &a.q[r*a.cols], &a.d[r*nb], bs, &out[r*stride], stride)
	}
	callOffset := func(k intKernel, r int) {
		t := r/8*8*nb + r%8
		k(&raw[0], rows, nb, (*int8)(unsafe.Pointer(&a.u[32*t])), &a.dt[t], nil, &out[r*stride], stride)
	}
	r := 0
	for ; k8 != nil && r+8 <= n; r += 8 {
		if offset {
			callOffset(k8, r)
		} else {
			call(k8, r)
		}
	}
	for ; k[1] != nil && r+4 <= n; r += 4 {
		if offset {
			callOffset(k[1], r)
		} else {
			call(k[1], r)
		}
	}
	for ; r < n; r++ {
		call(k[0], r)
	}
}
