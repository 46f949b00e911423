package llama

import "golang.org/x/sys/cpu"

// hasAVX2 selects the AVX2 kernels; each gives the bits of its generic
// kernel. (Every AVX2 CPU also has F16C, which dotQ8AVX2 uses.)
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

//go:noescape
func dotQ8AVX2(raw *byte, x *float32, nblocks int) float32

func dotQ8(raw []byte, x []float32) float32 {
	if hasAVX2 && len(x) >= Q8Block {
		nb := len(x) / Q8Block
		raw = raw[:nb*q8BlockBytes]
		return dotQ8AVX2(&raw[0], &x[0], nb)
	}
	return dotQ8Generic(raw, x)
}
