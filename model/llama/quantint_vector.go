//go:build amd64 || arm64

package llama

// kernelArgs is what mulIntWith passes the four- and eight-input kernels.
type kernelArgs uint8

const (
	argsPlain kernelArgs = iota // the quants, scales and sums of 16 (acts.q, d, bs)
	argsQ6                      // acts.q, d and actQ8K's offset words acts.q6 in the sums' place (Q6_K's four-input kernel reads no sums)
)

// mulIntWith is mulInt's walk with the kernels k (one input, four; nil
// for a type with one-input kernels only) and k8 (eight inputs; nil where
// there is none) over the rows rows of raw: each row applied to eight
// inputs at a time, then four, then the rest one at a time, the four-
// and eight-input kernels given args. Every kernel performs each
// input's operations in the same order, so an output does not depend on
// which kernel produced it. The kernels check nothing, so the bounds are
// checked here, before they run.
func mulIntWith(k [2]intKernel, k8 intKernel, args kernelArgs, rows int, raw []byte, a *acts, out []float32, stride int) {
	n := a.n
	_ = out[(n-1)*stride+rows-1]
	nb := a.cols / a.kind.block()
	_, _ = a.q[n*a.cols-1], a.d[n*nb-1]
	var bs *int16
	if a.kind == actQ8K {
		_ = a.bs[16*n*nb-1]
	}
	if args == argsQ6 {
		_ = a.q6[64*n*nb-1]
	}
	call := func(k intKernel, r int, args kernelArgs) {
		switch {
		case args == argsQ6:
			bs = &a.q6[64*r*nb]
		case a.kind == actQ8K:
			bs = &a.bs[16*r*nb]
		}
		k(&raw[0], rows, nb, &a.q[r*a.cols], &a.d[r*nb], bs, &out[r*stride], stride)
	}
	r := 0
	for ; k8 != nil && r+8 <= n; r += 8 {
		call(k8, r, args)
	}
	for ; k[1] != nil && r+4 <= n; r += 4 {
		call(k[1], r, args)
	}
	for ; r < n; r++ {
		call(k[0], r, argsPlain)
	}
}
