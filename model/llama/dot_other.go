//go:build !amd64 && !arm64

package llama

const hasAVX2FMA = false

// offsetActs: no offset words here (see acts.q6).
const offsetActs = false

func dotF32(w, x []float32) float32 { return dot32Generic(w, x) }

func mulF32(w []float32, cols int, x []float32, n int, out []float32, stride int) {
	mulF32Generic(w, cols, x, n, out, stride)
}

func scores(out, k []float32, stride int, q []float32) { scoresGeneric(out, k, stride, q) }

func wsum(out, a, v []float32, stride int) { wsumGeneric(out, a, v, stride) }

func dotQuant(t Type, raw []byte, x []float32) float32 { return dotQuantGeneric(t, raw, x) }

func mulQuant(t Type, raw []byte, cols int, x []float32, n int, out []float32, stride int, _ []float32) {
	mulQuantGeneric(t, raw, cols, x, n, out, stride)
}

func mulInt(t Type, raw []byte, a *acts, out []float32, stride int) {
	mulIntGeneric(t, raw, a, out, stride)
}
