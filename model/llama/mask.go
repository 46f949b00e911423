package llama

import "math"

// applyMask sets to -Inf the logits of the tokens mask does not allow
// (model.Seq.Mask; nil allows all). The mask allows at least one token,
// so argmax and the sampler still find one.
func applyMask(logits []float32, mask []uint64) {
	if mask == nil {
		return
	}
	ninf := float32(math.Inf(-1))
	for w, bits := range mask {
		if bits == ^uint64(0) {
			continue
		}
		lo := w * 64
		hi := min(lo+64, len(logits))
		for i := lo; i < hi; i++ {
			if bits&(1<<(i-lo)) == 0 {
				logits[i] = ninf
			}
		}
	}
}
