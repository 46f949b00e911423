//go:build !amd64

package synth

// hasFillAVX512 is false off amd64: fill computes every output in Go.
const hasFillAVX512 = false

// fillVector reports false: there is no vector fill off amd64.
func fillVector(kv []byte, sts []uint64, section int) bool { return false }
