package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestMulKernelsAgree: the register-blocked matrix-times-vectors kernels
// give exactly the bits of their generic twins, which are the one-vector
// kernels applied to each vector, on random shapes: column counts with and
// without a ragged tail of 32, row counts of one and more, vector counts
// that leave every remainder of the blocks of 8 and 4, and outputs with a
// stride wider than the rows.
func TestMulKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 200; trial++ {
		cols := 32 * (1 + r.IntN(12))
		if trial%4 == 3 {
			cols = 1 + r.IntN(200) // ragged: the generic kernel's path
		}
		rows := 1 + r.IntN(70)
		n := 1 + r.IntN(19)
		stride := rows + r.IntN(5)
		w := make([]float32, rows*cols)
		x := make([]float32, n*cols)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		for i := range x {
			x[i] = float32(r.NormFloat64() * 10)
		}
		got, want := make([]float32, n*stride), make([]float32, n*stride)
		mulF32(w, cols, x, n, got, stride)
		mulF32Generic(w, cols, x, n, want, stride)
		for v := 0; v < n; v++ {
			for i := 0; i < rows; i++ {
				g, e := got[v*stride+i], want[v*stride+i]
				if math.Float32bits(g) != math.Float32bits(e) {
					t.Fatalf("F32 %d×%d, %d vectors: out[%d][%d] = %v, generic %v (AVX2 %v)", rows, cols, n, v, i, g, e, hasAVX2FMA)
				}
				if d := dot32Generic(w[i*cols:(i+1)*cols], x[v*cols:(v+1)*cols]); d != e {
					t.Fatalf("F32 generic twin %v, one-vector kernel %v", e, d)
				}
			}
		}
	}
}

// TestAttentionKernelsAgree: attention's kernels over float32 views of
// the pool give the bits of its byte-decoding path: scores those of dot4
// and dotBytes slot by slot, wsum those of one axpy per position in order,
// for head dims with and without a tail of 4 and 8 and slots of any stride.
func TestAttentionKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for trial := 0; trial < 300; trial++ {
		n := 1 + r.IntN(130)
		if trial%2 == 0 {
			n = 8 * (1 + r.IntN(16))
		}
		count := 1 + r.IntN(20)
		stride := n + r.IntN(40)
		k := make([]float32, (count-1)*stride+n)
		v := make([]float32, len(k))
		q := make([]float32, n)
		for i := range k {
			k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		for i := range q {
			q[i] = float32(r.NormFloat64())
		}
		got := make([]float32, count)
		scores(got, k, stride, q)
		b := make([]byte, 4*n)
		for i := range got {
			putF32s(b, k[i*stride:i*stride+n])
			if e, e2 := dot4(k[i*stride:i*stride+n], q), dotBytes(b, q); math.Float32bits(got[i]) != math.Float32bits(e) || e != e2 {
				t.Fatalf("n=%d slot %d: scores %v, dot4 %v, dotBytes %v (AVX2 %v)", n, i, got[i], e, e2, hasAVX2FMA)
			}
		}
		a := make([]float32, count)
		for i := range a {
			a[i] = float32(r.Float64())
		}
		out, want := make([]float32, n), make([]float32, n)
		for i := range out {
			out[i] = float32(r.NormFloat64())
		}
		copy(want, out)
		wsum(out, a, v, stride)
		for i, ai := range a {
			for d := range want {
				want[d] += float32(ai * v[i*stride+d])
			}
		}
		for d := range out {
			if math.Float32bits(out[d]) != math.Float32bits(want[d]) {
				t.Fatalf("n=%d, %d positions: wsum[%d] = %v, one axpy per position %v (AVX2 %v)", n, count, d, out[d], want[d], hasAVX2FMA)
			}
		}
	}
}

// TestUnitBlock: unitBlock is a bijection on the units for any count of
// workers, and workers taking units in turn each walk consecutive blocks.
func TestUnitBlock(t *testing.T) {
	for workers := 1; workers <= 5; workers++ {
		for units := 0; units <= 40; units++ {
			seen := make([]bool, units)
			for i := 0; i < units; i++ {
				b := unitBlock(i, units, workers)
				if b < 0 || b >= units || seen[b] {
					t.Fatalf("units %d, workers %d: unit %d -> block %d (out of range or taken)", units, workers, i, b)
				}
				seen[b] = true
			}
			if units < 2*workers {
				continue
			}
			for w := 0; w < workers; w++ {
				for i := w + workers; i < units; i += workers {
					if unitBlock(i, units, workers) != unitBlock(i-workers, units, workers)+1 && i < units/workers*workers {
						t.Fatalf("units %d, workers %d: worker %d's units %d and %d are not consecutive blocks", units, workers, w, i-workers, i)
					}
				}
			}
		}
	}
}
