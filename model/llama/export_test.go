package llama

// DecodePoolBytes makes e read keys and values from the pool's bytes one
// float at a time, as on a machine where it cannot view them as float32s
// in place: tests compare the two paths.
func DecodePoolBytes(e *Executor) { e.viewKV = false }

// matVecAcc is MatVec's prompt-kernel scratch, kept across calls as a
// worker's is.
var matVecAcc = make([][]float32, 1)

// MatVec sets out[r·m.Rows + i] = row i of m times vector r of x (m.Cols
// floats each), for r < n, with the kernels a step uses (matmulTask, one
// worker); sums is blockSums' scratch, returned for reuse.
func MatVec(m *Matrix, x []float32, n int, out, sums []float32) []float32 {
	t := matmulTask{out: out, m: m, in: x, n: n, acc: matVecAcc}
	if needsSums(m.Type) {
		sums = blockSums(sums, x, m.Cols, n)
		t.sums = sums
	}
	for i := 0; i < (m.Rows+matmulChunk-1)/matmulChunk; i++ {
		t.Do(0, i)
	}
	return sums
}
