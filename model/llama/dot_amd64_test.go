package llama

import "testing"

// TestDot32AVX2At288: the AVX2 kernel itself (dotF32 may pick either) at
// the 15M shape's width.
func TestDot32AVX2At288(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	n := 288
	w, x := make([]float32, n), make([]float32, n)
	for i := range w {
		w[i], x[i] = float32(i%7)-3, float32(i%5)*0.1
	}
	if dot32AVX2(&w[0], &x[0], n) != dot32Generic(w, x) {
		t.Fatal("AVX2 kernel differs at 288")
	}
}
