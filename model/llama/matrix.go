package llama

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Q8Block is the number of weights in one Q8_0 block; a block is stored as a
// little-endian float16 scale followed by Q8Block int8 quants (34 bytes).
const Q8Block = 32

// Matrix is a row-major Rows × Cols weight matrix. F32 matrices keep their
// elements in F; the other types (F16, BF16 and the quantisations, see
// Type) keep their encoded bytes in Raw (little-endian, rows of whole
// blocks, as GGUF stores them). Either may alias a memory-mapped file.
type Matrix struct {
	Rows, Cols int
	Type       Type
	F          []float32
	Raw        []byte
	// pack is Raw's rows in the packed layout (Weights.Pack), nil if
	// none.
	pack []byte
}

func (m *Matrix) validate(name string) error {
	switch {
	case m.Type == F32:
		if len(m.F) != m.Rows*m.Cols {
			return fmt.Errorf("llama: %s: %d floats for %d×%d", name, len(m.F), m.Rows, m.Cols)
		}
	case m.Type.Loads():
		rb := m.Type.RowBytes(m.Cols)
		if rb < 0 {
			return fmt.Errorf("llama: %s: %s rows of %d columns are not whole blocks of %d", name, m.Type, m.Cols, m.Type.Block())
		}
		if len(m.Raw) != m.Rows*rb {
			return fmt.Errorf("llama: %s: %d bytes for %d×%d %s", name, len(m.Raw), m.Rows, m.Cols, m.Type)
		}
	default:
		return fmt.Errorf("llama: %s: unsupported tensor type %s (%s load)", name, m.Type, LoadableTypes())
	}
	return nil
}

// Row writes row r, decoded to float32, into dst (len Cols). The decoding
// is ggml's (and gguf-py's): each weight is its block's scale times its
// quant, minus or plus the block's minimum where the type has one, each
// operation rounded to float32 (see dequantize).
func (m *Matrix) Row(r int, dst []float32) {
	dst = dst[:m.Cols]
	if m.Type == F32 {
		copy(dst, m.F[r*m.Cols:(r+1)*m.Cols])
		return
	}
	rb := m.Type.RowBytes(m.Cols)
	dequantize(m.Type, m.Raw[r*rb:(r+1)*rb], dst)
}

// dotRow is row r of m times x (len Cols), in the order every kernel of this
// package uses for m's type (see the package documentation): the result
// depends only on the row and x. The types with integer kernels round x
// first (acts), as a step does.
func (m *Matrix) dotRow(r int, x []float32) float32 {
	if m.Type == F32 {
		return dotF32(m.F[r*m.Cols:(r+1)*m.Cols], x)
	}
	rb := m.Type.RowBytes(m.Cols)
	raw := m.Raw[r*rb : (r+1)*rb]
	if k := actOf(m.Type); k != actNone {
		var a acts
		a.quantize(k, x, m.Cols, 1)
		var out [1]float32
		mulInt(m.Type, raw, &a, out[:], 1)
		return out[0]
	}
	if m.Type == F16 {
		return dotF16(raw, x)
	}
	return dotQuant(m.Type, raw, x)
}

// dotF16Generic is a float16 row times x, each weight converted exactly to
// float32, in four lanes of rounded products as dot4 (dotF16 picks a
// vector kernel of that order where there is one).
func dotF16Generic(raw []byte, x []float32) float32 {
	raw = raw[:2*len(x)]
	var s0, s1, s2, s3 float32
	n := len(x) &^ 3
	for k := 0; k < n; k += 4 {
		r, xx := raw[2*k:2*k+8:2*k+8], x[k:k+4:k+4]
		s0 += float32(f16tab[uint16(r[0])|uint16(r[1])<<8] * xx[0])
		s1 += float32(f16tab[uint16(r[2])|uint16(r[3])<<8] * xx[1])
		s2 += float32(f16tab[uint16(r[4])|uint16(r[5])<<8] * xx[2])
		s3 += float32(f16tab[uint16(r[6])|uint16(r[7])<<8] * xx[3])
	}
	for k := n; k < len(x); k++ {
		p := float32(f16tab[binary.LittleEndian.Uint16(raw[2*k:])] * x[k])
		switch k & 3 {
		case 0:
			s0 += p
		case 1:
			s1 += p
		default:
			s2 += p
		}
	}
	return (s0 + s1) + (s2 + s3)
}

// f16tab maps every float16 bit pattern to its float32 value (exact).
var f16tab = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = F16ToF32(uint16(i))
	}
	return &t
}()

// F16ToF32 converts an IEEE 754 half-precision value to float32 (exactly).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: mant × 2^-24
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// F32ToF16 converts a float32 to half precision, rounding to nearest even
// (overflow gives infinity). Writers of model files use it.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, up to infinity: correct
	}
	return sign | uint16(h)
}
