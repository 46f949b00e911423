package llama

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The integer kernels (quantint_amd64.s): rows consecutive rows of
// nblocks blocks times input 0 (x1) or inputs 0-3 (x4) of the rounded
// inputs at xq, xd, bs.

//go:noescape
func dotQ8Ix1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ8Ix4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ4KIx1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ4KIx4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ5KIx1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ5KIx4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ6KIx1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ6KIx4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ8Ix1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ8Ix4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ4KIx1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ4KIx4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ5KIx1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ5KIx4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ6KIx1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ6KIx4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ix1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ix4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ix1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ix4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ix1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ix4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ix1VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ix4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ4KIx8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ5KIx8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ6KIx8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ5KPx1AVX512(p *byte, groups, nblocks int, xq *int8, xd *float32, bs *int16, out *float32)

//go:noescape
func dotQ6KPx1AVX512(p *byte, groups, nblocks int, xq *int8, xd *float32, bs *int16, out *float32)

// packedKernel multiplies groups groups of packed rows (groupRows rows of
// nblocks super-blocks each, from p) by a fixed number of rounded inputs
// (packKernel's), writing input i's groupRows·groups outputs to
// out[i·outStride…]; sums are the inputs' sums for the minimums (acts.bp
// for Q4_K, acts.bs for Q5_K) or their offsets (acts.ob for Q8_0, Q4_0).
type packedKernel func(p *byte, groups, nblocks int, xq *int8, xd *float32, sums unsafe.Pointer, out *float32, outStride int)

// usePacked: the CPU has the packed kernels' AVX-512 (F, BW, VL, VNNI).
var usePacked = useVNNI && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW

// packKernel is the packed kernel of type t taking inputs (1, 4 or 8)
// inputs at a time on this CPU, nil if none: Q4_K's for each count
// (packq4k_amd64.s), Q8_0's, Q4_0's and Q5_0's likewise (packq8_amd64.s;
// Q5_0's with AVX-512 BITALG too), Q5_K's
// and Q6_K's for one (pack_amd64.s).
func packKernel(t Type, inputs int) packedKernel {
	if !usePacked || !useVNNI {
		return nil
	}
	var ks *[3]packedKernel
	switch t {
	case Q4_K:
		ks = &packedQ4K
	case Q8_0:
		ks = &packedQ8
	case Q4_0:
		ks = &packedQ40
	case Q5_0:
		if !cpu.X86.HasAVX512BITALG { // VPSHUFBITQMB
			return nil
		}
		ks = &packedQ50
	}
	if ks != nil {
		switch inputs {
		case 1:
			return ks[0]
		case 4:
			return ks[1]
		case 8:
			return ks[2]
		}
		return nil
	}
	if inputs != 1 {
		return nil
	}
	switch t {
	case Q5_K:
		return dotQ5KPacked
	case Q6_K:
		return dotQ6KPacked
	}
	return nil
}

// The packed kernels of one, four and eight inputs, and dotQ5KPacked and
// dotQ6KPacked the one-input Q5_K and Q6_K ones as packedKernels (one
// input: no stride); package-level, so that packKernel, called per unit
// of a matrix product, allocates nothing.
var (
	packedQ4K                 = [3]packedKernel{dotQ4KRx1VNNI, dotQ4KRx4VNNI, dotQ4KRx8VNNI}
	packedQ8                  = [3]packedKernel{dotQ8Rx1VNNI, dotQ8Rx4VNNI, dotQ8Rx8VNNI}
	packedQ40                 = [3]packedKernel{dotQ40Rx1VNNI, dotQ40Rx4VNNI, dotQ40Rx8VNNI}
	packedQ50                 = [3]packedKernel{dotQ50Rx1VNNI, dotQ50Rx4VNNI, dotQ50Rx8VNNI}
	dotQ5KPacked packedKernel = func(p *byte, groups, nblocks int, xq *int8, xd *float32, bs unsafe.Pointer, out *float32, _ int) {
		dotQ5KPx1AVX512(p, groups, nblocks, xq, xd, (*int16)(bs), out)
	}
	dotQ6KPacked packedKernel = func(p *byte, groups, nblocks int, xq *int8, xd *float32, bs unsafe.Pointer, out *float32, _ int) {
		dotQ6KPx1AVX512(p, groups, nblocks, xq, xd, (*int16)(bs), out)
	}
)

type intKernel func(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

// intKernels are the integer kernels of each type: one input, four;
// intKernelsVNNI the same with VPDPBUSD or VPDPWSSD (AVX512-VNNI and VL)
// where the CPU has them (useVNNI): the same int32 sums, the same bits.
var intKernelsVNNI = map[Type][2]intKernel{
	Q8_0: {dotQ8Ix1VNNI, dotQ8Ix4VNNI},
	Q4_0: {dotQ40Ix1VNNI, dotQ40Ix4VNNI},
	Q5_0: {dotQ50Ix1VNNI, dotQ50Ix4VNNI},
	Q4_K: {dotQ4KIx1VNNI, dotQ4KIx4VNNI},
	Q5_K: {dotQ5KIx1VNNI, dotQ5KIx4VNNI},
	Q6_K: {dotQ6KIx1VNNI, dotQ6KIx4VNNI},
}

// intKernels8VNNI are the eight-input kernels (VNNI, for they keep the
// accumulators in AVX-512's Y16-Y31): each weight block unpacked once for
// eight inputs; the same bits as four or one.
var intKernels8VNNI = map[Type]intKernel{
	Q4_K: dotQ4KIx8VNNI,
	Q5_K: dotQ5KIx8VNNI,
	Q6_K: dotQ6KIx8VNNI,
}

// offsetActs: acts keeps actQ8K's offset words for Q6_K's eight-input
// kernel (acts.q6) where the CPU has VNNI (the tests may turn useVNNI
// off, not this).
var offsetActs = useVNNI

// useVNNI selects intKernelsVNNI (the tests turn it off to check the AVX2
// kernels on a machine that has both).
var useVNNI = hasAVX2FMA && cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VL

var intKernels = map[Type][2]intKernel{
	Q8_0: {dotQ8Ix1AVX2, dotQ8Ix4AVX2},
	Q4_0: {dotQ40Ix1AVX2, dotQ40Ix4AVX2},
	Q5_0: {dotQ50Ix1AVX2, dotQ50Ix4AVX2},
	Q4_K: {dotQ4KIx1AVX2, dotQ4KIx4AVX2},
	Q5_K: {dotQ5KIx1AVX2, dotQ5KIx4AVX2},
	Q6_K: {dotQ6KIx1AVX2, dotQ6KIx4AVX2},
}

// mulInt is mulIntGeneric with the vector kernels where the CPU has AVX2
// (and FMA): the same bits. Each row is applied to four inputs at a time,
// then to the rest one at a time (mulIntWith, which checks the bounds).
func mulInt(t Type, raw []byte, a *acts, out []float32, stride int) {
	k, ok := intKernels[t]
	if useVNNI {
		k, ok = intKernelsVNNI[t]
	}
	rb := t.RowBytes(a.cols)
	rows := len(raw) / rb
	n := a.n
	if !hasAVX2FMA || !ok || rows == 0 || n == 0 {
		mulIntGeneric(t, raw, a, out, stride)
		return
	}
	var k8 intKernel
	args := argsPlain
	if useVNNI {
		k8 = intKernels8VNNI[t]
		if t == Q6_K { // its eight-input kernel takes acts.q6 (offsetActs: VNNI)
			args = argsQ6
		}
	}
	mulIntWith(k, k8, args, rows, raw, a, out, stride)
}

//go:noescape
func dotQ4KRx8VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, bp unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ4KRx4VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, bp unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ4KRx1VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, bp unsafe.Pointer, out *float32, outStride int)

// The packed Q8_0, Q4_0 and Q5_0 kernels (packq8_amd64.s): ob is the inputs'
// block offsets (acts.ob).

//go:noescape
func dotQ8Rx8VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ8Rx4VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ8Rx1VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ40Rx8VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ40Rx4VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ40Rx1VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ50Rx8VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ50Rx4VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)

//go:noescape
func dotQ50Rx1VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, ob unsafe.Pointer, out *float32, outStride int)
