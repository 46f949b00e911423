package llama

import "golang.org/x/sys/cpu"

// hasAVX2FMA selects the vector kernels, which use AVX2 and FMA (every CPU
// with both also has F16C, which the integer kernels use); each gives the bits of
// its generic kernel.
var hasAVX2FMA = !forceGeneric && cpu.X86.HasAVX2 && cpu.X86.HasFMA

// fma32FMA is fma32 by the CPU (VFMADD231SS): the tests check fma32
// against it.
//
//go:noescape
func fma32FMA(a, b, c float32) float32

//go:noescape
func dot32AVX2(w, x *float32, n int) float32

func dotF32(w, x []float32) float32 {
	if hasAVX2FMA && len(x) >= 32 && len(x)%32 == 0 {
		w = w[:len(x)]
		return dot32AVX2(&w[0], &x[0], len(x))
	}
	return dot32Generic(w, x)
}

// The matrix kernels: rows consecutive rows of a matrix times one, four or
// eight consecutive vectors of x (see each in dot_amd64.s).

//go:noescape
func dotF32x1AVX2(w *float32, rows, n int, x *float32, out *float32)

//go:noescape
func dotF32x4AVX2(w *float32, rows, n int, x *float32, out *float32, outStride int)

//go:noescape
func dotF32x8AVX2(w *float32, rows, n int, x *float32, out *float32, outStride int)

//go:noescape
func dotF32x8AVX512(w *float32, rows, n int, x *float32, out *float32, outStride int)

// hasAVX512 selects dotF32x8AVX512 for blocks of eight vectors: the bits
// of dotF32x8AVX2, twice the lanes per instruction, and no passes.
var hasAVX512 = hasAVX2FMA && cpu.X86.HasAVX512F

// mulF32 is mulF32Generic, register-blocked: each row of w is loaded once
// for eight (then four) vectors of x at a time (eight with AVX-512 where
// the CPU has it: the same bits); the rest one vector at a time, with the
// rows prefetched ahead. The kernels check nothing, so the bounds are
// checked here, before they run.
func mulF32(w []float32, cols int, x []float32, n int, out []float32, stride int) {
	rows := len(w) / cols
	if !hasAVX2FMA || cols%32 != 0 || rows == 0 || n == 0 {
		mulF32Generic(w, cols, x, n, out, stride)
		return
	}
	_, _ = x[n*cols-1], out[(n-1)*stride+rows-1]
	if n == 1 {
		dotF32x1AVX2(&w[0], rows, cols, &x[0], &out[0])
		return
	}
	// Several vectors: a block of rows goes to every vector before the
	// next block, so that the weights stream from memory once, while the
	// block before is applied to all vectors.
	for i0 := 0; i0 < rows; i0 += mulF32Rows {
		rb := min(mulF32Rows, rows-i0)
		wb := w[i0*cols:]
		r := 0
		for ; r+8 <= n; r += 8 {
			if hasAVX512 {
				dotF32x8AVX512(&wb[0], rb, cols, &x[r*cols], &out[r*stride+i0], stride)
			} else {
				dotF32x8AVX2(&wb[0], rb, cols, &x[r*cols], &out[r*stride+i0], stride)
			}
		}
		for ; r+4 <= n; r += 4 {
			dotF32x4AVX2(&wb[0], rb, cols, &x[r*cols], &out[r*stride+i0], stride)
		}
		for ; r < n; r++ {
			dotF32x1AVX2(&wb[0], rb, cols, &x[r*cols], &out[r*stride+i0])
		}
	}
}

// mulF32Rows is the number of weight rows mulF32 applies to all its
// vectors before it moves on.
const mulF32Rows = 8

//go:noescape
func scoresAVX(out *float32, count int, k *float32, stride int, q *float32, n int)

// scores is scoresGeneric with a four-lane vector kernel where the CPU has
// AVX (head dims that are a multiple of 4).
func scores(out, k []float32, stride int, q []float32) {
	n := len(q)
	if !hasAVX2FMA || n == 0 || n%4 != 0 || len(out) == 0 {
		scoresGeneric(out, k, stride, q)
		return
	}
	_ = k[(len(out)-1)*stride+n-1]
	scoresAVX(&out[0], len(out), &k[0], stride, &q[0], n)
}

//go:noescape
func wsumAVX2(out *float32, n int, a *float32, count int, v *float32, stride int)

// wsum is wsumGeneric, eight elements of out at a time where the CPU has
// AVX2 (head dims that are a multiple of 8).
func wsum(out, a, v []float32, stride int) {
	n := len(out)
	if !hasAVX2FMA || n == 0 || n%8 != 0 || len(a) == 0 {
		wsumGeneric(out, a, v, stride)
		return
	}
	_ = v[(len(a)-1)*stride+n-1]
	wsumAVX2(&out[0], n, &a[0], len(a), &v[0], stride)
}
