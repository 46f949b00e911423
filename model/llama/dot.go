package llama

// dot32Generic is Σ w[k]·x[k] in this package's fixed order (dotF32 picks
// a vector kernel with the same order where the CPU has one):
//
//   - lane j (0..31) starts at +0 and becomes fma32(w[k], x[k], lane j)
//     for k ≡ j (mod 32), in increasing k: each step a fused multiply-add,
//     rounded once (VFMADD231PS in the vector kernels, fma32 here, which
//     gives its bits exactly);
//   - v[j] = (lane[j] + lane[8+j]) + (lane[16+j] + lane[24+j]), j < 8;
//   - h[j] = v[j] + v[j+4], j < 4; then (h[0] + h[2]) + (h[1] + h[3]).
//
// The result depends only on w and x: never on the kernel, the batch or
// the machine's vector width.
func dot32Generic(w, x []float32) float32 {
	w = w[:len(x)]
	var l [32]float32
	k := 0
	for ; k+32 <= len(x); k += 32 {
		ww, xx := w[k:k+32:k+32], x[k:k+32:k+32]
		for j := range l {
			l[j] = fma32(ww[j], xx[j], l[j])
		}
	}
	for j := 0; k+j < len(x); j++ {
		l[j] = fma32(w[k+j], x[k+j], l[j])
	}
	var v [8]float32
	for j := range v {
		v[j] = (l[j] + l[8+j]) + (l[16+j] + l[24+j])
	}
	h0, h1, h2, h3 := v[0]+v[4], v[1]+v[5], v[2]+v[6], v[3]+v[7]
	return (h0 + h2) + (h1 + h3)
}

// mulF32Generic sets out[r·stride + i] = dot32Generic(row i of w, x vector
// r) for the rows of w (len(w)/cols of them, cols floats each) and the n
// vectors of x (cols floats each, consecutive). mulF32 is the same with
// the register-blocked kernel where the CPU has it: the same bits.
func mulF32Generic(w []float32, cols int, x []float32, n int, out []float32, stride int) {
	rows := len(w) / cols
	for r := 0; r < n; r++ {
		xr := x[r*cols : (r+1)*cols]
		for i := 0; i < rows; i++ {
			out[r*stride+i] = dot32Generic(w[i*cols:(i+1)*cols], xr)
		}
	}
}
