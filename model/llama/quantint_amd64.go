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
func dotQ8Ux4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ8U2x8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40U2x8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50U2x8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ8Ux8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ux4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ40Ux8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ux4VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ50Ux8VNNI(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)

//go:noescape
func dotQ5KPx1AVX512(p *byte, groups, nblocks int, xq *int8, xd *float32, bs *int16, out *float32)

//go:noescape
func dotQ6KPx1AVX512(p *byte, groups, nblocks int, xq *int8, xd *float32, bs *int16, out *float32)

// packedKernel multiplies groups groups of packed rows (groupRows rows of
// nblocks super-blocks each, from p) by a fixed number of rounded inputs
// (packKernel's), writing input i's groupRows·groups outputs to
// out[i·outStride…]; sums are the inputs' sums for the minimums (acts.bp
// for Q4_K, acts.bs for Q5_K).
type packedKernel func(p *byte, groups, nblocks int, xq *int8, xd *float32, sums *int16, out *float32, outStride int)

// usePacked: the CPU has the packed kernels' AVX-512 (F, BW, VL, VNNI).
var usePacked = useVNNI && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW

// packKernel is the packed kernel of type t taking inputs (1, 4 or 8)
// inputs at a time on this CPU, nil if none: Q4_K's for each count
// (packq4k_amd64.s), Q5_K's and Q6_K's for one (pack_amd64.s).
func packKernel(t Type, inputs int) packedKernel {
	if !usePacked || !useVNNI {
		return nil
	}
	if t == Q4_K {
		switch inputs {
		case 1:
			return dotQ4KRx1VNNI
		case 4:
			return dotQ4KRx4VNNI
		case 8:
			return dotQ4KRx8VNNI
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

// dotQ5KPacked and dotQ6KPacked are the one-input packed kernels as
// packedKernels (one input: no stride); package-level, so that
// packKernel, called per unit of a matrix product, allocates nothing.
var (
	dotQ5KPacked packedKernel = func(p *byte, groups, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, _ int) {
		dotQ5KPx1AVX512(p, groups, nblocks, xq, xd, bs, out)
	}
	dotQ6KPacked packedKernel = func(p *byte, groups, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, _ int) {
		dotQ6KPx1AVX512(p, groups, nblocks, xq, xd, bs, out)
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

// intKernelsOffsetVNNI are the offset kernels (four inputs, eight) of
// the 32-weight types: they take acts.u and acts.dt (quantint_amd64.s);
// the same bits as the others.
var intKernelsOffsetVNNI = map[Type][2]intKernel{
	Q8_0: {dotQ8Ux4VNNI, twoRows(dotQ8U2x8VNNI, dotQ8Ux8VNNI, 34)},
	Q4_0: {dotQ40Ux4VNNI, twoRows(dotQ40U2x8VNNI, dotQ40Ux8VNNI, 18)},
	Q5_0: {dotQ50Ux4VNNI, twoRows(dotQ50U2x8VNNI, dotQ50Ux8VNNI, 22)},
}

// offsetActs: acts keeps actQ8's inputs for the offset kernels too (u,
// dt) where the CPU has VNNI (the tests may turn useVNNI off, not this).
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
		if ko, ok := intKernelsOffsetVNNI[t]; ok && offsetActs {
			k[1], k8, args = ko[0], ko[1], argsOffset
		}
		if t == Q6_K { // its eight-input kernel takes acts.q6 (offsetActs: VNNI)
			args = argsQ6
		}
	}
	mulIntWith(k, k8, args, rows, raw, a, out, stride)
}

// twoRows is the eight-input offset kernel one of a type (blocks of bb
// bytes) by its two-row kernel two, two rows at a time, and the last row
// of an odd count by one.
func twoRows(two, one intKernel, bb int) intKernel {
	return func(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int) {
		if rows >= 2 {
			two(raw, rows&^1, nblocks, xq, xd, bs, out, outStride)
		}
		if rows&1 != 0 {
			last := unsafe.Add(unsafe.Pointer(raw), (rows-1)*nblocks*bb)
			one((*byte)(last), 1, nblocks, xq, xd, bs, (*float32)(unsafe.Add(unsafe.Pointer(out), 4*(rows-1))), outStride)
		}
	}
}

//go:noescape
func dotQ4KRx8VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, bp *int16, out *float32, outStride int)

//go:noescape
func dotQ4KRx4VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, bp *int16, out *float32, outStride int)

//go:noescape
func dotQ4KRx1VNNI(p *byte, groups, nblocks int, xq *int8, xd *float32, bp *int16, out *float32, outStride int)
