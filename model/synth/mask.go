package synth

// maskWeights are the weights of the byte tokens when a mask restricts
// sampling (constrained decoding), in units of 1e-5 like baseChars: the
// base distribution's bytes keep their weights and the bytes JSON needs
// and English text rarely has get some, so that under a JSON grammar
// strings end after about ten bytes, objects and arrays hold about two
// members and nest rarely (the nesting is subcritical): generation ends
// well within a few hundred tokens. Other printable ASCII bytes weigh
// little, control bytes and bytes over 0x7f nothing (drawn only when
// nothing else is allowed).
var maskWeights = func() [256]uint64 {
	var w [256]uint64
	for b := 0x20; b < 0x7f; b++ {
		w[b] = 50
	}
	for _, c := range baseChars {
		w[c.b] = uint64(c.w)
	}
	w['\n'] = 0
	for b := '0'; b <= '9'; b++ {
		w[b] = 1500
	}
	for b, v := range map[byte]uint64{'"': 12000, '{': 2500, '[': 2500, '}': 4000, ']': 4000, ':': 3000, ',': 3000, '\\': 100} {
		w[b] = v
	}
	return w
}()

func allowed(mask []uint64, id int32) bool {
	return id >= 0 && int(id)/64 < len(mask) && mask[id/64]&(1<<(id%64)) != 0
}

// sampleMasked draws from the allowed tokens with the request's draw r:
// EOS, when allowed, with probability EOSProbability (or surely when no
// byte is), else a byte with probability proportional to maskWeights
// among the allowed ones (uniformly when they all weigh nothing).
// Temperature, top_p, top_k and min_p do not reshape it.
func (e *Executor) sampleMasked(mask []uint64, r uint64) int32 {
	total, n := maskedBytes(mask)
	if allowed(mask, e.prof.EOS) && (n == 0 || isEOS(r, e.prof.EOSProbability)) {
		return e.prof.EOS
	}
	x := mix64(r ^ domainBytes)
	if n == 0 {
		panic("sim: a mask allows no token") // the engine's masks always allow one
	}
	if total == 0 {
		k := int(x % uint64(n))
		for b := 0; b < 256; b++ {
			if allowed(mask, int32(b)) {
				if k == 0 {
					return int32(b)
				}
				k--
			}
		}
	}
	target := (x >> 32) * total >> 32
	var acc uint64
	last := int32(0)
	for b := 0; b < 256; b++ {
		if allowed(mask, int32(b)) {
			acc += maskWeights[b]
			last = int32(b)
			if target < acc {
				return last
			}
		}
	}
	return last // unreachable: target < total
}

// maskedBytes is the total maskWeights of the bytes mask allows, and
// their number.
func maskedBytes(mask []uint64) (total uint64, n int) {
	for b := 0; b < 256; b++ {
		if allowed(mask, int32(b)) {
			total += maskWeights[b]
			n++
		}
	}
	return total, n
}
