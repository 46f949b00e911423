package llama

// hasTiles: the F32 prompt kernel (tile_arm64.s) runs wherever NEON does.
const hasTiles = hasNEON

//go:noescape
func tileF32NEON(w *float32, ldw int, x *float32, ldx int, kc int, acc *float32, flags int, out *float32, outStride int)

// mulF32Prompt is mulF32 (the same bits) with the NEON prompt kernel (3 ×
// 4 tiles) for the rows and inputs that fill its tiles; acc is the
// worker's scratch, grown as needed.
func mulF32Prompt(w []float32, cols int, x []float32, n int, out []float32, stride int, acc *[]float32) {
	if !hasNEON || cols%32 != 0 || n < tileMinInputs || len(w)/cols < 3 {
		mulF32(w, cols, x, n, out, stride)
		return
	}
	mulF32Tiles(tileF32NEON, 3, 4, w, cols, x, n, out, stride, acc)
}

//go:noescape
func scores4NEON(out *float32, outStride int, count int, k *float32, stride int, qp *float32, n int)

// scores4 is scores4Generic with the NEON kernel.
func scores4(out []float32, outStride, count int, k []float32, stride int, qp []float32, n int) {
	if !hasNEON || n == 0 || n%4 != 0 || count == 0 {
		scores4Generic(out, outStride, count, k, stride, qp, n)
		return
	}
	_, _, _ = out[3*outStride+count-1], k[(count-1)*stride+n-1], qp[4*n-1]
	scores4NEON(&out[0], outStride, count, &k[0], stride, &qp[0], n)
}
