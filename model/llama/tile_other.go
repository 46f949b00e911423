//go:build !amd64

package llama

const hasTiles = false

func mulF32Prompt(w []float32, cols int, x []float32, n int, out []float32, stride int, _ *[]float32) {
	mulF32(w, cols, x, n, out, stride)
}

func mulQ8Prompt(raw []byte, cols int, x []float32, n int, out []float32, stride int, _ *[]float32) {
	mulQ8(raw, cols, x, n, out, stride)
}
