package llama

import "testing"

// TestPromptKernelsAVX2: on a CPU with AVX-512 the prompt functions are
// checked again with it turned off, so the AVX2 tiles (tileF32AVX2) meet
// the twins too.
func TestPromptKernelsAVX2(t *testing.T) {
	if !hasAVX2FMA {
		t.Skip("no AVX2 and FMA")
	}
	if !hasTiles {
		t.Skip("TestPromptKernelsAgree checked the AVX2 tiles")
	}
	hasTiles = false
	defer func() { hasTiles = true }()
	checkPromptKernels(t)
}
