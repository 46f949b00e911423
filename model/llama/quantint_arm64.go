package llama

import "golang.org/x/sys/cpu"

// The integer kernels (quantint_arm64.s): rows consecutive rows of
// nblocks blocks times input 0 (x1) or inputs 0-3 (x4) of the rounded
// inputs at xq, xd, bs; …DOT with SDOT (the DotProd extension), …MUL
// with base NEON's widening multiplies.

//go:noescape
func dotQ8Ix1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ8Ix4DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ8Ix1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ8Ix4MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ4KIx1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ4KIx1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ6KIx1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ6KIx1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ5KIx1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ5KIx1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ix1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ix4DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ix1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ix4MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ix1DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ix4DOT(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ix1MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ix4MUL(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

type intKernel func(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

// hasDotProd selects the SDOT kernels (a variable: the tests check the
// others too on a CPU that has it).
var hasDotProd = cpu.ARM64.HasASIMDDP

// offsetActs: no offset words here (see acts.q6).
const offsetActs = false

// intKernels are the integer kernels of each type: one input, four; with
// SDOT and without.
var intKernels = map[Type][2][2]intKernel{
	Q8_0: {{dotQ8Ix1MUL, dotQ8Ix4MUL}, {dotQ8Ix1DOT, dotQ8Ix4DOT}},
	Q4_0: {{dotQ40Ix1MUL, dotQ40Ix4MUL}, {dotQ40Ix1DOT, dotQ40Ix4DOT}},
	Q5_0: {{dotQ50Ix1MUL, dotQ50Ix4MUL}, {dotQ50Ix1DOT, dotQ50Ix4DOT}},
	Q4_K: {{dotQ4KIx1MUL, nil}, {dotQ4KIx1DOT, nil}}, // one input at a time
	Q5_K: {{dotQ5KIx1MUL, nil}, {dotQ5KIx1DOT, nil}},
	Q6_K: {{dotQ6KIx1MUL, nil}, {dotQ6KIx1DOT, nil}},
}

// mulInt is mulIntGeneric with the NEON kernels: the same bits. Each row
// is applied to four inputs at a time, then to the rest one at a time
// (mulIntWith, which checks the bounds).
func mulInt(t Type, raw []byte, a *acts, out []float32, stride int) {
	ks, ok := intKernels[t]
	rb := t.RowBytes(a.cols)
	rows := len(raw) / rb
	n := a.n
	if !hasNEON || !ok || rows == 0 || n == 0 {
		mulIntGeneric(t, raw, a, out, stride)
		return
	}
	if hasDotProd {
		mulIntWith(ks[1], nil, argsPlain, rows, raw, a, out, stride)
		return
	}
	mulIntWith(ks[0], nil, argsPlain, rows, raw, a, out, stride)
}
