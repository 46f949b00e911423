//go:build !amd64

package llama

const hasAVX2 = false

func dotF32(w, x []float32) float32 { return dot32Generic(w, x) }

func dotQ8(raw []byte, x []float32) float32 { return dotQ8Generic(raw, x) }
