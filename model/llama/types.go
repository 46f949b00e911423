package llama

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// Type is a tensor's element encoding: its number is GGUF's (ggml_type).
// Every ggml type has its name (String); Matrix computes with F32, F16,
// BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K (Loads) and
// refuses the others by name.
type Type uint8

// The encodings a Matrix holds.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	BF16 Type = 30
)

// typeInfo is a ggml type's name, the number of elements of its block and
// the bytes of one block (ggml's type traits; the numbers of removed types
// keep the names ggml gave them).
type typeInfo struct {
	name         string
	block, bytes int
}

var typeInfos = [...]typeInfo{
	0:  {"F32", 1, 4},
	1:  {"F16", 1, 2},
	2:  {"Q4_0", 32, 18},
	3:  {"Q4_1", 32, 20},
	4:  {"Q4_2", 0, 0}, // removed from ggml
	5:  {"Q4_3", 0, 0}, // removed from ggml
	6:  {"Q5_0", 32, 22},
	7:  {"Q5_1", 32, 24},
	8:  {"Q8_0", 32, 34},
	9:  {"Q8_1", 32, 40},
	10: {"Q2_K", 256, 84},
	11: {"Q3_K", 256, 110},
	12: {"Q4_K", 256, 144},
	13: {"Q5_K", 256, 176},
	14: {"Q6_K", 256, 210},
	15: {"Q8_K", 256, 292},
	16: {"IQ2_XXS", 256, 66},
	17: {"IQ2_XS", 256, 74},
	18: {"IQ3_XXS", 256, 98},
	19: {"IQ1_S", 256, 50},
	20: {"IQ4_NL", 32, 18},
	21: {"IQ3_S", 256, 110},
	22: {"IQ2_S", 256, 82},
	23: {"IQ4_XS", 256, 136},
	24: {"I8", 1, 1},
	25: {"I16", 1, 2},
	26: {"I32", 1, 4},
	27: {"I64", 1, 8},
	28: {"F64", 1, 8},
	29: {"IQ1_M", 256, 56},
	30: {"BF16", 1, 2},
	31: {"Q4_0_4_4", 0, 0}, // removed from GGUF files
	32: {"Q4_0_4_8", 0, 0},
	33: {"Q4_0_8_8", 0, 0},
	34: {"TQ1_0", 256, 54},
	35: {"TQ2_0", 256, 66},
	36: {"IQ4_NL_4_4", 0, 0}, // removed from GGUF files
	37: {"IQ4_NL_4_8", 0, 0},
	38: {"IQ4_NL_8_8", 0, 0},
	39: {"MXFP4", 32, 17},
	40: {"NVFP4", 64, 36},
	41: {"Q1_0", 128, 18},
	42: {"Q2_0", 64, 18},
}

// loadable lists the types Matrix computes with, in the order the errors
// name them.
var loadable = []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K}

// LoadableTypes is the list of types Matrix computes with, as a phrase
// for errors: "F32, F16, …, Q6_K".
func LoadableTypes() string {
	s := ""
	for i, t := range loadable {
		if i > 0 {
			s += ", "
		}
		s += t.String()
	}
	return s
}

// String is ggml's name of the type ("Q4_K"), or "ggml type N" for a
// number ggml never used.
func (t Type) String() string {
	if int(t) < len(typeInfos) && typeInfos[t].name != "" {
		return typeInfos[t].name
	}
	return fmt.Sprintf("ggml type %d", uint8(t))
}

// Loads reports whether a Matrix can hold and compute with type t.
func (t Type) Loads() bool {
	for _, l := range loadable {
		if l == t {
			return true
		}
	}
	return false
}

// Block is the number of elements in one block of t and BlockBytes its
// size in bytes (1 and the element size for F32, F16, BF16); 0 for a type
// ggml removed or never had.
func (t Type) Block() int {
	if int(t) < len(typeInfos) {
		return typeInfos[t].block
	}
	return 0
}

// BlockBytes is the size in bytes of one block of t (see Block).
func (t Type) BlockBytes() int {
	if int(t) < len(typeInfos) {
		return typeInfos[t].bytes
	}
	return 0
}

// RowBytes is the size in bytes of a row of cols elements of type t, or -1
// when cols is not a whole number of t's blocks or t has no known size.
func (t Type) RowBytes(cols int) int {
	b := t.Block()
	if b == 0 || cols%b != 0 {
		return -1
	}
	return cols / b * t.BlockBytes()
}

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
