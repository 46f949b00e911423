package llama

import "golang.org/x/sys/cpu"

// hasAVX2 selects the AVX2 kernel; both kernels give the same bits.
var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func dot32AVX2(w, x *float32, n int) float32

func dotF32(w, x []float32) float32 {
	if hasAVX2 && len(x) >= 32 && len(x)%32 == 0 {
		w = w[:len(x)]
		return dot32AVX2(&w[0], &x[0], len(x))
	}
	return dot32Generic(w, x)
}
