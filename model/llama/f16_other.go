//go:build !arm64

package llama

// dotF16 is dotF16Generic: only arm64 has an F16 kernel.
func dotF16(raw []byte, x []float32) float32 { return dotF16Generic(raw, x) }
