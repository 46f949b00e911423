package llama

import "testing"

// TestIntKernelsAgreeAVX2: with AVX512-VNNI present, the AVX2 integer
// kernels (the path of CPUs without it) still give the twin's bits.
func TestIntKernelsAgreeAVX2(t *testing.T) {
	if !useVNNI {
		t.Skip("no AVX512-VNNI: TestIntKernelsAgree checks the AVX2 kernels")
	}
	useVNNI = false
	defer func() { useVNNI = true }()
	TestIntKernelsAgree(t)
}
