package llama

// dotQuant is dotQuantGeneric with the type's vector kernel where the CPU
// has AVX2 and FMA: the same bits.
func dotQuant(t Type, raw []byte, x []float32) float32 {
	return dotQuantGeneric(t, raw, x)
}

// mulQuant is mulQuantGeneric with the type's vector kernels where the CPU
// has AVX2 and FMA: the same bits. sums is blockSums of x for the types
// that take it (needsSums).
func mulQuant(t Type, raw []byte, cols int, x []float32, n int, out []float32, stride int, sums []float32) {
	mulQuantGeneric(t, raw, cols, x, n, out, stride)
}
