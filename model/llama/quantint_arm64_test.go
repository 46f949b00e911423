package llama

import "testing"

// TestIntKernelsAgreeWithoutDotProd: on a CPU with the DotProd extension the integer
// kernels are checked again without it, so the base NEON ones (SMULL,
// SADDLP, ADDP) meet the twins too.
func TestIntKernelsAgreeWithoutDotProd(t *testing.T) {
	if !hasDotProd {
		t.Skip("no DotProd: TestIntKernelsAgree checked the base NEON kernels")
	}
	hasDotProd = false
	defer func() { hasDotProd = true }()
	TestIntKernelsAgree(t)
}
