package llama

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// quantTypes are the types with block kernels (dotQuant, mulQuant).
var quantTypes = []Type{Q4_1, Q5_1, BF16}

// fixtureTypes are the types whose decoding the committed fixture checks.
var fixtureTypes = []Type{F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K}

// edgeScales are float16 scales every kind of block gets now and then:
// both zeros, the largest and smallest (subnormal) magnitudes of both
// signs, one.
var edgeScales = []uint16{0x0000, 0x8000, 0x7bff, 0xfbff, 0x0001, 0x8001, 0x3c00}

// randomScale is a float16 scale: usually a small random one (as
// quantisers write), sometimes an edge value.
func randomScale(r *rand.Rand, big bool) uint16 {
	if r.IntN(8) == 0 {
		return edgeScales[r.IntN(len(edgeScales))]
	}
	v := r.NormFloat64() * 0.01
	if big {
		v *= 1000
	}
	return F32ToF16(float32(v))
}

// randomRows returns rows × cols weights of type t: random quants and
// scale bytes (every bit pattern of the packed scales occurs), float16
// scales from randomScale, some blocks with every quant and scale bit set.
// With finite false, BF16 and F16 values may be infinities and NaNs.
func randomRows(r *rand.Rand, t Type, rows, cols int, finite bool) []byte {
	raw := make([]byte, rows*t.RowBytes(cols))
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	put := func(b []byte, h uint16) { b[0], b[1] = byte(h), byte(h>>8) }
	switch t {
	case F16, BF16:
		for i := 0; i < len(raw); i += 2 {
			var h uint16
			if t == F16 {
				h = F32ToF16(float32(r.NormFloat64()))
			} else {
				h = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
			}
			switch {
			case r.IntN(16) == 0:
				h = uint16(r.Uint32()) // any bits
			case r.IntN(16) == 0:
				h = []uint16{0, 0x8000, 1, 0x8001}[r.IntN(4)]
			}
			exp := h >> 10 & 0x1f
			if t == BF16 {
				exp = h >> 7 & 0xff
			}
			if finite && (exp == 0x1f && t == F16 || exp == 0xff && t == BF16) {
				h &^= 0x4000 // finite: clear the exponent's top bit
			}
			put(raw[i:], h)
		}
		return raw
	}
	bb := t.BlockBytes()
	for b := 0; b < len(raw)/bb; b++ {
		blk := raw[b*bb : (b+1)*bb]
		if r.IntN(10) == 0 {
			for i := range blk {
				blk[i] = 0xff
			}
		}
		switch t {
		case Q8_0, Q4_0, Q5_0:
			put(blk, randomScale(r, false))
		case Q4_1, Q5_1:
			put(blk, randomScale(r, false))
			put(blk[2:], randomScale(r, false))
		case Q4_K, Q5_K:
			put(blk, randomScale(r, false))
			put(blk[2:], randomScale(r, false))
		case Q6_K:
			put(blk[208:], randomScale(r, false))
		}
	}
	return raw
}

// The committed fixture, testdata/dequant.bin: per type, its number
// (uint32), the byte count of its blocks (uint32), the blocks, and the
// floats gguf-py's gguf.quants.dequantize gives for them (uint32 count,
// little-endian float32s).
const fixturePath = "testdata/dequant.bin"

var updateFixture = flag.Bool("update-fixture", false, "rewrite "+fixturePath+" from gguf-py (needs KVLEASE_LLAMACPP)")

// TestDequantizeMatchesFixture: every type's decoding gives, bit for bit,
// the floats gguf-py's dequantiser gave for the fixture's blocks.
func TestDequantizeMatchesFixture(t *testing.T) {
	b, err := os.ReadFile(fixturePath)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Type]bool{}
	fixtureRecords(b, func(typ Type, raw, want []byte) {
		checkDequantize(t, typ, raw, want)
		seen[typ] = true
	})
	for _, typ := range fixtureTypes {
		if !seen[typ] {
			t.Errorf("%s missing from %s", typ, fixturePath)
		}
	}
}

// fixtureRecords calls f with each of the fixture's records: type,
// blocks, floats.
func fixtureRecords(b []byte, f func(typ Type, raw, floats []byte)) {
	for len(b) >= 12 {
		typ := Type(binary.LittleEndian.Uint32(b))
		n := int(binary.LittleEndian.Uint32(b[4:]))
		raw := b[8 : 8+n]
		b = b[8+n:]
		nf := int(binary.LittleEndian.Uint32(b))
		f(typ, raw, b[4:4+4*nf])
		b = b[4+4*nf:]
	}
}

func checkDequantize(t *testing.T, typ Type, raw, want []byte) {
	t.Helper()
	cols := len(want) / 4
	if typ.RowBytes(cols) != len(raw) {
		t.Fatalf("%s: %d bytes for %d weights", typ, len(raw), cols)
	}
	m := Matrix{Rows: 1, Cols: cols, Type: typ, Raw: raw}
	got := make([]float32, cols)
	m.Row(0, got)
	for i := range got {
		if w := binary.LittleEndian.Uint32(want[4*i:]); math.Float32bits(got[i]) != w {
			t.Fatalf("%s weight %d (block %d): %v (%#x), gguf-py %v (%#x)", typ, i, i/typ.Block(), got[i], math.Float32bits(got[i]), math.Float32frombits(w), w)
		}
	}
}

// ggufPy runs a python program with gguf-py on its path and returns its
// standard output; the test skips without KVLEASE_LLAMACPP. gguf-py needs
// numpy: KVLEASE_PYTHON names a python3 that has it (default python3).
func ggufPy(t *testing.T, prog string, stdin []byte) []byte {
	t.Helper()
	dir := os.Getenv("KVLEASE_LLAMACPP")
	if dir == "" {
		t.Skip("KVLEASE_LLAMACPP (a llama.cpp source tree, for gguf-py) not set")
	}
	py := os.Getenv("KVLEASE_PYTHON") // a python3 with numpy
	if py == "" {
		py = "python3"
	}
	cmd := exec.Command(py, "-c", prog)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(dir, "gguf-py"))
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 with gguf-py: %v\n%s", err, stderr.String())
	}
	return out
}

// dequantizePy is the program behind TestDequantizeMatchesGGUFPy: records
// of (type, byte count, blocks) on stdin, each answered with the
// fixture's record (type, byte count, blocks, float count, floats).
const dequantizePy = `
import sys, struct, numpy as np
from gguf.constants import GGMLQuantizationType as T
from gguf.quants import dequantize
b = sys.stdin.buffer.read()
out = sys.stdout.buffer
while b:
    t, n = struct.unpack_from("<II", b)
    raw = b[8:8+n]
    b = b[8+n:]
    f = dequantize(np.frombuffer(raw, dtype=np.uint8).reshape(1, n), T(t)).astype(np.float32).reshape(-1)
    out.write(struct.pack("<II", t, n) + raw + struct.pack("<I", f.size) + f.tobytes())
`

// TestDequantizeMatchesGGUFPy: many random blocks of every type (edge
// scales, all scale bits) decode as gguf-py decodes them. With
// -update-fixture a few of them become the committed fixture.
func TestDequantizeMatchesGGUFPy(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	var in bytes.Buffer
	blocks := map[Type]int{}
	for _, typ := range fixtureTypes {
		cols := 64 * typ.Block()
		if *updateFixture {
			cols = max(256, 2*typ.Block())
		}
		raw := randomRows(r, typ, 1, cols, false)
		binary.Write(&in, binary.LittleEndian, [2]uint32{uint32(typ), uint32(len(raw))})
		in.Write(raw)
		blocks[typ] = cols / typ.Block()
	}
	out := ggufPy(t, dequantizePy, in.Bytes())
	if *updateFixture {
		if err := os.WriteFile(fixturePath, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fixtureRecords(out, func(typ Type, raw, want []byte) {
		checkDequantize(t, typ, raw, want)
		delete(blocks, typ)
	})
	if len(blocks) > 0 {
		t.Fatalf("gguf-py answered no blocks for %v", blocks)
	}
}

// TestTypeTableMatchesGGUFPy: every ggml type gguf-py knows has our name,
// block size and block bytes.
func TestTypeTableMatchesGGUFPy(t *testing.T) {
	out := ggufPy(t, `
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
for t in T:
    b, s = GGML_QUANT_SIZES[t]
    print(int(t), t.name, b, s)
`, nil)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 30 {
		t.Fatalf("gguf-py listed %d types", len(lines))
	}
	for _, l := range lines {
		var n, block, size int
		var name string
		if _, err := fmt.Sscan(l, &n, &name, &block, &size); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		typ := Type(n)
		if typ.String() != name || typ.Block() != block || typ.BlockBytes() != size {
			t.Errorf("type %d: ours %s (%d, %d bytes), gguf-py %s (%d, %d bytes)", n, typ, typ.Block(), typ.BlockBytes(), name, block, size)
		}
	}
}

// TestQuantDotReference: each type's dot (the generic twin) is close to a
// float64 sum over the dequantised weights, and BF16's is exactly
// dot32Generic over them.
func TestQuantDotReference(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, typ := range quantTypes {
		for trial := 0; trial < 40; trial++ {
			cols := typ.Block() * (1 + r.IntN(12))
			if typ == BF16 {
				cols = 1 + r.IntN(700)
			}
			raw := randomRows(r, typ, 1, cols, true)
			x := make([]float32, cols)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			w := make([]float32, cols)
			m := Matrix{Rows: 1, Cols: cols, Type: typ, Raw: raw}
			m.Row(0, w)
			got := dotQuantGeneric(typ, raw, x)
			ref, mag := 0.0, 0.0
			for i := range w {
				ref += float64(w[i]) * float64(x[i])
				mag += math.Abs(float64(w[i]) * float64(x[i]))
			}
			if typ == BF16 {
				if d := dot32Generic(w, x); math.Float32bits(d) != math.Float32bits(got) {
					t.Fatalf("BF16 %d: %v, dot32Generic over the decoded row %v", cols, got, d)
				}
			}
			// The min terms are computed apart from the scaled quants: the
			// rounding is relative to both, bounded by the row's scale
			// magnitude times its inputs.
			bound := mag
			if needsSums(typ) {
				bound += scaleMagnitude(typ, raw, x)
			}
			if bound > math.MaxFloat32 || math.IsNaN(ref) {
				continue // overflowing edge scales (float32 sums may overflow)
			}
			if e := math.Abs(float64(got) - ref); e > 2e-6*bound*math.Sqrt(float64(cols)/32)+1e-30 {
				t.Fatalf("%s %d cols: %v, float64 %v (error %g, bound %g)", typ, cols, got, ref, e, bound)
			}
		}
	}
}

// scaleMagnitude is Σ (|d·q| + |m|)·|x| over a row of a type with
// minimums: the size of the two sums its kernel subtracts.
func scaleMagnitude(typ Type, raw []byte, x []float32) float64 {
	s := 0.0
	bb := typ.BlockBytes()
	for b := 0; b < len(x)/typ.Block(); b++ {
		blk := raw[b*bb:]
		d, m := float64(f16tab[le16(blk)]), float64(f16tab[le16(blk[2:])])
		for i := 0; i < typ.Block(); i++ {
			s += (math.Abs(d)*31 + math.Abs(m)) * math.Abs(float64(x[b*typ.Block()+i]))
		}
	}
	return s
}

// TestQuantKernelsAgree: every type's vector kernels (one row, and a row
// applied to several inputs) give the bits of the generic twin, on random
// shapes with every remainder of the input blocks and strided outputs;
// the vectors include edge values (zeros of both signs, huge and tiny
// magnitudes).
func TestQuantKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, typ := range quantTypes {
		for trial := 0; trial < 60; trial++ {
			bl := max(typ.Block(), 32)
			cols := bl * (1 + r.IntN(6))
			if typ == BF16 && trial%4 == 3 {
				cols = 1 + r.IntN(300)
			}
			rows := 1 + r.IntN(20)
			n := 1 + r.IntN(11)
			stride := rows + r.IntN(3)
			raw := randomRows(r, typ, rows, cols, true)
			x := randomInputs(r, n, cols)
			got, want := make([]float32, n*stride), make([]float32, n*stride)
			var sums []float32
			if needsSums(typ) {
				sums = blockSums(nil, x, cols, n)
			}
			mulQuant(typ, raw, cols, x, n, got, stride, sums)
			mulQuantGeneric(typ, raw, cols, x, n, want, stride)
			rb := typ.RowBytes(cols)
			for v := 0; v < n; v++ {
				for i := 0; i < rows; i++ {
					g, e := got[v*stride+i], want[v*stride+i]
					if math.Float32bits(g) != math.Float32bits(e) && !(g != g && e != e) {
						t.Fatalf("%s %d×%d, %d vectors: out[%d][%d] = %v, generic %v (AVX2 %v)", typ, rows, cols, n, v, i, g, e, hasAVX2FMA)
					}
					d := dotQuant(typ, raw[i*rb:(i+1)*rb], x[v*cols:(v+1)*cols])
					if math.Float32bits(d) != math.Float32bits(e) && !(d != d && e != e) {
						t.Fatalf("%s %d cols: one-row kernel %v, generic %v (AVX2 %v)", typ, cols, d, e, hasAVX2FMA)
					}
				}
			}
		}
	}
}

// TestLoadableTypesNamed: a matrix of a type that does not load is
// refused by its ggml name, and the error says what loads.
func TestLoadableTypesNamed(t *testing.T) {
	m := Matrix{Rows: 1, Cols: 256, Type: Type(16), Raw: make([]byte, 66)}
	err := m.validate("w")
	if err == nil || !strings.Contains(err.Error(), "IQ2_XXS") || !strings.Contains(err.Error(), "Q4_K") {
		t.Fatalf("IQ2_XXS matrix: %v", err)
	}
	m = Matrix{Rows: 1, Cols: 288, Type: Q4_K, Raw: make([]byte, 144)}
	if err := m.validate("w"); err == nil || !strings.Contains(err.Error(), "Q4_K rows of 288 columns") {
		t.Fatalf("Q4_K matrix of 288 columns: %v", err)
	}
	if s := Type(99).String(); s != "ggml type 99" {
		t.Fatalf("type 99: %s", s)
	}
}
