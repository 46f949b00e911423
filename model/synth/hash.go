package synth

// golden is 2^64/φ, the splitmix64 increment.
const golden = 0x9e3779b97f4a7c15

// golden2, golden3 and golden4 are 2, 3 and 4 × golden modulo 2^64: the
// splitmix64 counter two, three and four steps on.
const (
	golden2 uint64 = 0x3c6ef372fe94f82a
	golden3 uint64 = 0xdaa66d2c7ddf743f
	golden4 uint64 = 0x78dde6e5fd29f054
)

// Domain separators: each use of the model seed gets its own key so that,
// for example, a KV seed never equals a sampling draw.
const (
	prefixRoot    = 0x70726566697821a5 // h_{-1}
	domainKV      = 0x6b765f7365656421
	domainGreedy  = 0x6772656564792121
	domainSampled = 0x73616d706c656421
	domainContext = 0x636f6e7465787421
	domainBytes   = 0x6279746573212121
	domainFill    = 0x66696c6c6b762121
	domainAdapter = 0x6c6f726121212121
)

// mix64 is the splitmix64 finalizer: a bijection of uint64 with full
// avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// combine keys h with x. For a fixed x it is a bijection of h and for a fixed
// h a bijection of x, so a change in either input always changes the result.
func combine(h, x uint64) uint64 {
	return mix64(h ^ mix64(x+golden))
}

// prefixStep extends the prefix state h_{q-1} with token tok at position q.
func prefixStep(h uint64, tok int32, q int) uint64 {
	return combine(h, uint64(uint32(tok))|uint64(q)<<32)
}

// kvSeed is s_q = PRF(modelSeed, h_q, q); key is mix64(modelSeed^domainKV).
func kvSeed(key, h uint64, q int) uint64 {
	return combine(combine(key, h), uint64(q))
}
