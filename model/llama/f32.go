package llama

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// littleEndian reports whether the machine stores float32 little-endian,
// as model files do.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// F32s views little-endian float32 bytes b (len a multiple of 4) as a
// []float32. On a little-endian machine, when b is 4-byte aligned (a
// memory-mapped file's tensors are), the result aliases b: no copy, and the
// weights stay in the page cache. Otherwise it is a decoded copy.
func F32s(b []byte) []float32 {
	n := len(b) / 4
	if n == 0 {
		return nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// viewF32 is b (4-byte aligned, len a multiple of 4) as []float32, aliased:
// for little-endian machines only (the caller checks littleEndian).
func viewF32(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}
