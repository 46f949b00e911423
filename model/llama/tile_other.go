//go:build !amd64 && !arm64

package llama

const hasTiles = false

func mulF32Prompt(w []float32, cols int, x []float32, n int, out []float32, stride int, _ *[]float32) {
	mulF32(w, cols, x, n, out, stride)
}

func scores4(out []float32, outStride, count int, k []float32, stride int, qp []float32, n int) {
	scores4Generic(out, outStride, count, k, stride, qp, n)
}
