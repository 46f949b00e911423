package llama

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPromptKernelsAgree: the F32 prompt kernel (mulF32Prompt) gives the
// bits of the generic twin, the one-vector kernel applied to each vector,
// on shapes that leave every remainder of its tiles (rows mod 4 and 3,
// inputs mod 3 and 4), span several blocks of inputs and of
// columns (with a short last block), and write outputs with a stride
// wider than the rows; the scratch is reused across shapes, as a
// worker's is.
func TestPromptKernelsAgree(t *testing.T) {
	if !hasTiles {
		t.Log("no AVX-512 F and VL: AVX2 tiles")
	}
	checkPromptKernels(t)
}

func checkPromptKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	var acc []float32
	shapes := [][3]int{ // rows, cols, inputs
		{4, 32, 6}, {5, 64, 7}, {7, 96, 8}, {2, 32, 6}, {3, 32, 11}, {1, 32, 12},
		{9, tileF32Cols + 32, 13}, {13, 2*tileF32Cols + 96, tileF32Inputs + 5},
		{64, tileF32Cols, 2*tileF32Inputs + 1},
	}
	for trial := 0; trial < 12; trial++ {
		shapes = append(shapes, [3]int{1 + r.IntN(20), 32 * (1 + r.IntN(40)), 1 + r.IntN(80)})
	}
	for _, s := range shapes {
		rows, cols, n := s[0], s[1], s[2]
		stride := rows + r.IntN(3)
		w, x := make([]float32, rows*cols), make([]float32, n*cols)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		for i := range x {
			x[i] = float32(r.NormFloat64() * 10)
		}
		got, want := make([]float32, n*stride), make([]float32, n*stride)
		mulF32Prompt(w, cols, x, n, got, stride, &acc)
		mulF32Generic(w, cols, x, n, want, stride)
		compareOuts(t, "F32", rows, cols, n, stride, got, want)
	}
}

func compareOuts(t *testing.T, typ string, rows, cols, n, stride int, got, want []float32) {
	t.Helper()
	for v := 0; v < n; v++ {
		for i := 0; i < rows; i++ {
			if g, e := got[v*stride+i], want[v*stride+i]; math.Float32bits(g) != math.Float32bits(e) {
				t.Fatalf("%s %d×%d, %d vectors: out[%d][%d] = %v, generic %v (tiles %v)", typ, rows, cols, n, v, i, g, e, hasTiles)
			}
		}
	}
}

// TestForceGeneric: the build tag kvlease_generic turns every vector
// kernel off, so that `go test -tags kvlease_generic` checks the pure-Go
// path (.ci/run does).
func TestForceGeneric(t *testing.T) {
	if !forceGeneric {
		t.Skip("built without -tags kvlease_generic")
	}
	if hasAVX2FMA || hasTiles {
		t.Fatalf("kvlease_generic: vector kernels on (AVX2+FMA %v, tiles %v)", hasAVX2FMA, hasTiles)
	}
}

// TestScores4Agrees: the four-query scores kernel gives, for each query,
// the bits of dot4 (the one-query kernels' order), on head dims from 4
// up and key counts with every remainder of four.
func TestScores4Agrees(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for trial := 0; trial < 100; trial++ {
		n := 4 * (1 + r.IntN(40))
		count := 1 + r.IntN(19)
		stride := n + r.IntN(9)
		outStride := count + r.IntN(3)
		k := make([]float32, (count-1)*stride+n)
		for i := range k {
			k[i] = float32(r.NormFloat64())
		}
		var q [4][]float32
		for j := range q {
			q[j] = make([]float32, n)
			for i := range q[j] {
				q[j][i] = float32(r.NormFloat64() * 3)
			}
		}
		qp := make([]float32, 4*n)
		packQueries4(qp, q[0], q[1], q[2], q[3])
		got := make([]float32, 3*outStride+count)
		scores4(got, outStride, count, k, stride, qp, n)
		for j := range q {
			for i := 0; i < count; i++ {
				if g, e := got[j*outStride+i], dot4(k[i*stride:i*stride+n], q[j]); math.Float32bits(g) != math.Float32bits(e) {
					t.Fatalf("n %d, %d keys: query %d key %d = %v, dot4 %v (AVX-512 %v)", n, count, j, i, g, e, hasTiles)
				}
			}
		}
	}
}
