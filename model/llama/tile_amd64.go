package llama

import "golang.org/x/sys/cpu"

// The prompt kernels (tile_amd64.s): register tiles of several weight rows
// times several input vectors over a block of columns, for steps of many
// rows (a prompt's chunk). Each output keeps the lanes and the order of
// its one-vector kernel, so the bits are those of the decode path.

//go:noescape
func tileF32AVX512(w *float32, ldw int, x *float32, ldx int, kc int, acc *float32, flags int, out *float32, outStride int)

// hasTiles selects the prompt kernels: AVX-512 F and VL (their 32
// registers hold the tiles' accumulators).
var hasTiles = hasAVX512 && cpu.X86.HasAVX512VL

// mulF32Prompt is mulF32 (the same bits) with the prompt kernel for the
// rows and inputs that fill its tiles (4 × 3 with AVX-512, else 3 × 4 with
// AVX2 and FMA); acc is the worker's scratch, grown as needed.
func mulF32Prompt(w []float32, cols int, x []float32, n int, out []float32, stride int, acc *[]float32) {
	rows := len(w) / cols
	mr, nr, kernel := 4, 3, tileF32AVX512
	if !hasTiles {
		mr, nr, kernel = 3, 4, tileF32AVX2
	}
	if !hasAVX2FMA || cols%32 != 0 || n < tileMinInputs || rows < mr {
		mulF32(w, cols, x, n, out, stride)
		return
	}
	mulF32Tiles(kernel, mr, nr, w, cols, x, n, out, stride, acc)
}

//go:noescape
func scores4AVX512(out *float32, outStride int, count int, k *float32, stride int, qp *float32, n int)

// scores4 is scores4Generic with the AVX-512 kernel where the CPU has it.
func scores4(out []float32, outStride, count int, k []float32, stride int, qp []float32, n int) {
	if !hasTiles || n == 0 || n%4 != 0 || count == 0 {
		scores4Generic(out, outStride, count, k, stride, qp, n)
		return
	}
	_, _, _ = out[3*outStride+count-1], k[(count-1)*stride+n-1], qp[4*n-1]
	scores4AVX512(&out[0], outStride, count, &k[0], stride, &qp[0], n)
}

//go:noescape
func tileF32AVX2(w *float32, ldw int, x *float32, ldx int, kc int, acc *float32, flags int, out *float32, outStride int)
