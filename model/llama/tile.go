package llama

// Blocking of the prompt kernels. A tile's inputs for one block of columns
// stay in L1 while the tile walks the chunk's rows; the accumulators of
// the chunk's rows × one block of inputs live in the worker's scratch
// between blocks of columns (a reduction's lanes, not its result: the
// order is unchanged).
const (
	tileMinInputs = 6   // fewer: the batched kernels (mulF32)
	tileF32Inputs = 60  // inputs per block, a multiple of 3 and 4
	tileF32Cols   = 512 // columns per block, a multiple of 32
)

// packQueries4 packs four queries of n floats (n a multiple of 4) for
// scores4: group m of 16 floats holds q_t[4m..4m+3] at 4t.
func packQueries4(qp []float32, q0, q1, q2, q3 []float32) {
	n := len(q0)
	qp = qp[:4*n]
	for t, q := range [4][]float32{q0, q1, q2, q3} {
		q = q[:n]
		for m := 0; m < n; m += 4 {
			copy(qp[4*m+4*t:4*m+4*t+4], q[m:m+4])
		}
	}
}

// scores4Generic sets out[t·outStride + i] = dot4(k[i·stride:], q_t) for
// the four queries packed in qp (packQueries4, n floats each) and i <
// count: the scores of four queries against the same keys (scores4 picks
// a vector kernel with the same bits).
func scores4Generic(out []float32, outStride, count int, k []float32, stride int, qp []float32, n int) {
	var q [4][]float32
	for t := range q {
		q[t] = make([]float32, 0, n)
		for m := 0; m < n; m += 4 {
			q[t] = append(q[t], qp[4*m+4*t:4*m+4*t+4]...)
		}
	}
	for t := range q {
		scoresGeneric(out[t*outStride:t*outStride+count], k, stride, q[t])
	}
}
