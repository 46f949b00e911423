//go:build !amd64

package llama

// expSum is expSumGeneric (no vector kernel on this architecture yet).
func expSum(sc []float32, mx float32) float32 { return expSumGeneric(sc, mx) }

// siluMul is siluMulGeneric.
func siluMul(h1, h3 []float32) { siluMulGeneric(h1, h3) }
