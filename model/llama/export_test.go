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
// worker, the inputs rounded as matmul rounds them); sums is blockSums'
// scratch, returned for reuse.
func MatVec(m *Matrix, x []float32, n int, out, sums []float32) []float32 {
	t := matmulTask{out: out, m: m, in: x, n: n, acc: matVecAcc, workers: 1}
	if k := actOf(m.Type); k != actNone {
		t.acts[k].quantize(k, x, m.Cols, n)
	} else if needsSums(m.Type) {
		sums = blockSums(sums, x, m.Cols, n)
		t.sums = sums
	}
	for i := 0; i < (m.Rows+matmulChunk-1)/matmulChunk; i++ {
		t.Do(0, i)
	}
	return sums
}

// RoundedInputs is x (whole blocks) as the integer kernels of weight type
// t multiply it: each input its block's scale times its rounded quant, in
// float64 (exact); x itself when t multiplies float32 inputs.
func RoundedInputs(t Type, x []float32) []float64 {
	out := make([]float64, len(x))
	k := actOf(t)
	if k == actNone {
		for i, v := range x {
			out[i] = float64(v)
		}
		return out
	}
	var a acts
	a.quantize(k, x, len(x), 1)
	for i, q := range a.q {
		out[i] = float64(a.d[i/k.block()]) * float64(q)
	}
	return out
}

// Packed returns m with its packed layout (as Weights.Pack takes it), nil
// when m's type has no packed kernel on this CPU.
func Packed(m Matrix) *Matrix {
	if !m.packable() {
		return nil
	}
	m.pack = packNew(m.Type, m.Raw, m.Rows, m.Cols)
	return &m
}
