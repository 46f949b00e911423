//go:build amd64 || arm64

package llama

// tileF32Kernel is a prompt kernel (tileF32AVX512, tileF32AVX2,
// tileF32NEON): a register tile of mr weight rows (w + i·ldw floats) times
// nr input vectors (x + j·ldx floats) over kc columns, its outputs' 32
// lanes resumed from acc when flags&1 and written to out[j·outStride + i]
// when flags&2 (else left in acc: 384 floats a tile).
type tileF32Kernel func(w *float32, ldw int, x *float32, ldx int, kc int, acc *float32, flags int, out *float32, outStride int)

// mulF32Tiles is mulF32Prompt's walk: the rows and inputs that fill mr × nr
// tiles go through kernel in blocks of tileF32Inputs inputs and
// tileF32Cols columns, their lanes waiting in the worker's scratch acc
// (grown as needed) between blocks of columns; the rest of the rows and of
// the inputs through mulF32. The caller checks that the kernel runs (cols
// a multiple of 32, rows ≥ mr).
func mulF32Tiles(kernel tileF32Kernel, mr, nr int, w []float32, cols int, x []float32, n int, out []float32, stride int, acc *[]float32) {
	rows := len(w) / cols
	rowsT, nT := rows-rows%mr, n-n%nr
	_, _ = x[n*cols-1], out[(n-1)*stride+rows-1]
	need := rowsT / mr * (tileF32Inputs / nr) * 384
	if len(*acc) < need {
		*acc = make([]float32, need)
	}
	a := *acc
	for j0 := 0; j0 < nT; j0 += tileF32Inputs {
		j1 := min(j0+tileF32Inputs, nT)
		for k0 := 0; k0 < cols; k0 += tileF32Cols {
			kc := min(tileF32Cols, cols-k0)
			flags := 0
			if k0 > 0 {
				flags |= 1 // resume from the scratch
			}
			if k0+kc == cols {
				flags |= 2 // the last block: results to out
			}
			t := 0
			for i := 0; i < rowsT; i += mr {
				for j := j0; j < j1; j += nr {
					kernel(&w[i*cols+k0], cols, &x[j*cols+k0], cols, kc, &a[t*384], flags, &out[j*stride+i], stride)
					t++
				}
			}
		}
	}
	if rowsT < rows {
		mulF32(w[rowsT*cols:], cols, x, n, out[rowsT:], stride)
	}
	if nT < n {
		mulF32(w[:rowsT*cols], cols, x[nT*cols:], n-nT, out[nT*stride:], stride)
	}
}
