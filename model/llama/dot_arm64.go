package llama

// hasNEON selects the NEON kernels (dot_arm64.s, tile_arm64.s). Advanced
// SIMD is part of every arm64 CPU Go runs on (Go's own runtime uses it
// unconditionally), so only the build tag kvlease_generic turns them
// off. Each kernel gives the bits of its generic twin: FMLA is a fused
// multiply-add (rounded once: fma32's bits), FMUL then FADD round the
// product and then the sum.
const hasNEON = !forceGeneric

// hasAVX2FMA is amd64's: never on here (the tests print it).
const hasAVX2FMA = false

// fma32FMA is fma32 by the CPU (FMADD): the tests check fma32 against it.
//
//go:noescape
func fma32FMA(a, b, c float32) float32

// The F32 matrix kernels: rows consecutive rows of a matrix times one or
// four consecutive vectors of x (see each in dot_arm64.s).

//go:noescape
func dotF32x1NEON(w *float32, rows, n int, x *float32, out *float32)

//go:noescape
func dotF32x4NEON(w *float32, rows, n int, x *float32, out *float32, outStride int)

func dotF32(w, x []float32) float32 {
	if hasNEON && len(x) >= 32 && len(x)%32 == 0 {
		w = w[:len(x)]
		var out float32
		dotF32x1NEON(&w[0], 1, len(x), &x[0], &out)
		return out
	}
	return dot32Generic(w, x)
}

// mulF32 is mulF32Generic, register-blocked: each row of w is loaded once
// for four vectors of x at a time, the rest one vector at a time. The
// kernels check nothing, so the bounds are checked here, before they run.
func mulF32(w []float32, cols int, x []float32, n int, out []float32, stride int) {
	rows := len(w) / cols
	if !hasNEON || cols%32 != 0 || rows == 0 || n == 0 {
		mulF32Generic(w, cols, x, n, out, stride)
		return
	}
	_, _ = x[n*cols-1], out[(n-1)*stride+rows-1]
	if n == 1 {
		dotF32x1NEON(&w[0], rows, cols, &x[0], &out[0])
		return
	}
	// Several vectors: a block of rows goes to every vector before the
	// next block, so that the weights stream from memory once.
	for i0 := 0; i0 < rows; i0 += mulF32Rows {
		rb := min(mulF32Rows, rows-i0)
		wb := w[i0*cols:]
		r := 0
		for ; r+4 <= n; r += 4 {
			dotF32x4NEON(&wb[0], rb, cols, &x[r*cols], &out[r*stride+i0], stride)
		}
		for ; r < n; r++ {
			dotF32x1NEON(&wb[0], rb, cols, &x[r*cols], &out[r*stride+i0])
		}
	}
}

// mulF32Rows is the number of weight rows mulF32 applies to all its
// vectors before it moves on.
const mulF32Rows = 8

//go:noescape
func scoresNEON(out *float32, count int, k *float32, stride int, q *float32, n int)

// scores is scoresGeneric with a four-lane NEON kernel (head dims that are
// a multiple of 4).
func scores(out, k []float32, stride int, q []float32) {
	n := len(q)
	if !hasNEON || n == 0 || n%4 != 0 || len(out) == 0 {
		scoresGeneric(out, k, stride, q)
		return
	}
	_ = k[(len(out)-1)*stride+n-1]
	scoresNEON(&out[0], len(out), &k[0], stride, &q[0], n)
}

//go:noescape
func wsumNEON(out *float32, n int, a *float32, count int, v *float32, stride int)

// wsum is wsumGeneric, four elements of out at a time with NEON (head dims
// that are a multiple of 4).
func wsum(out, a, v []float32, stride int) {
	n := len(out)
	if !hasNEON || n == 0 || n%4 != 0 || len(a) == 0 {
		wsumGeneric(out, a, v, stride)
		return
	}
	_ = v[(len(a)-1)*stride+n-1]
	wsumNEON(&out[0], n, &a[0], len(a), &v[0], stride)
}

//go:noescape
func dotF16NEON(raw *byte, x *float32, n int) float32

// dotF16 is dotF16Generic with the NEON kernel for lengths that are a
// multiple of 4.
func dotF16(raw []byte, x []float32) float32 {
	n := len(x)
	if !hasNEON || n == 0 || n%4 != 0 {
		return dotF16Generic(raw, x)
	}
	raw = raw[:2*n]
	return dotF16NEON(&raw[0], &x[0], n)
}

//go:noescape
func dotBF16x1NEON(raw *byte, rows, n int, x *float32, out *float32)

// BF16 rows have a NEON kernel (Q8_0, Q4_0, Q5_0 and the K-quants have
// integer ones, quantint_arm64.go); Q4_1 and Q5_1 take their pure-Go
// kernels on arm64 for now.

// dotQuant is dotQuantGeneric, with the NEON kernel for BF16 rows whose
// length is a multiple of 32.
func dotQuant(t Type, raw []byte, x []float32) float32 {
	n := len(x)
	if !hasNEON || t != BF16 || n == 0 || n%32 != 0 {
		return dotQuantGeneric(t, raw, x)
	}
	raw = raw[:2*n]
	var out float32
	dotBF16x1NEON(&raw[0], 1, n, &x[0], &out)
	return out
}

// mulQuant is mulQuantGeneric, with the NEON kernel for BF16 rows whose
// length is a multiple of 32 (one vector at a time, the rows of a unit of
// work staying in cache). The kernel checks nothing, so the bounds are
// checked here.
func mulQuant(t Type, raw []byte, cols int, x []float32, n int, out []float32, stride int, _ []float32) {
	if !hasNEON || t != BF16 || cols%32 != 0 || n == 0 || len(raw) < 2*cols {
		mulQuantGeneric(t, raw, cols, x, n, out, stride)
		return
	}
	rows := len(raw) / (2 * cols)
	_, _ = x[n*cols-1], out[(n-1)*stride+rows-1]
	for r := 0; r < n; r++ {
		dotBF16x1NEON(&raw[0], rows, cols, &x[r*cols], &out[r*stride])
	}
}
