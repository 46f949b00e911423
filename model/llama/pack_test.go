package llama

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
)

// packTypes are the types with a packed layout.
var packTypes = []Type{Q4_K, Q5_K, Q6_K, Q8_0, Q4_0, Q5_0}

// TestPackRoundTrip: every row of a packed matrix unpacks to the file's
// bytes (any bytes: the twin multiplies the unpacked rows).
func TestPackRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, typ := range packTypes {
		for trial := 0; trial < 20; trial++ {
			rows, nb := groupRows*(1+r.IntN(4)), 1+r.IntN(4*qkK/typ.Block())
			bb, gb := typ.BlockBytes(), nb*packBytes(typ)
			raw := randomRows(r, typ, rows, nb*typ.Block(), false)
			for i := range raw {
				if r.IntN(2) == 0 {
					raw[i] = byte(r.Uint32()) // scales' bytes included
				}
			}
			p := packNew(typ, raw, rows, nb*typ.Block())
			if len(p) != rows/groupRows*gb {
				t.Fatalf("%s: %d packed bytes for %d rows of %d super-blocks", typ, len(p), rows, nb)
			}
			row := make([]byte, nb*bb)
			for i := 0; i < rows; i++ {
				g := i / groupRows
				unpackRow(typ, p[g*gb:(g+1)*gb], i%groupRows, nb, row)
				if !bytes.Equal(row, raw[i*nb*bb:(i+1)*nb*bb]) {
					t.Fatalf("%s: %d rows × %d super-blocks: row %d unpacks to other bytes", typ, rows, nb, i)
				}
			}
		}
	}
}

// TestPackedKernelsAgree: the packed kernel (where the CPU has one) and
// the packed twin give dotIntGeneric's bits on the file's rows, for every
// row range of whole groups, several inputs and strided outputs.
func TestPackedKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for trial := 0; trial < 120; trial++ {
		typ := packTypes[trial%len(packTypes)]
		groups, nb := 1+r.IntN(5), 1+r.IntN(6*qkK/typ.Block())
		rows, cols := groups*groupRows, nb*typ.Block()
		n := 1 + r.IntN(20) // Q4_K, Q8_0, Q4_0: eight, four and one at a time
		stride := rows + r.IntN(3)
		m := Matrix{Rows: rows, Cols: cols, Type: typ, Raw: randomRows(r, typ, rows, cols, trial%8 > 1)}
		m.pack = packNew(typ, m.Raw, rows, cols)
		var a acts
		a.quantize(actOf(typ), randomInputs(r, n, cols), cols, n)
		want := make([]float32, n*stride)
		mulIntGeneric(typ, m.Raw, &a, want, stride)
		lo := groupRows * r.IntN(groups)
		hi := lo + groupRows*(1+r.IntN(groups-lo/groupRows))
		check := func(name string, got []float32) {
			t.Helper()
			for v := 0; v < n; v++ {
				for i := lo; i < hi; i++ {
					g, e := got[v*stride+i-lo], want[v*stride+i]
					if math.Float32bits(g) != math.Float32bits(e) && !(g != g && e != e) {
						t.Fatalf("%s %s: %d×%d rows %d..%d, %d inputs: out[%d][%d] = %v, generic %v", typ, name, rows, cols, lo, hi, n, v, i, g, e)
					}
				}
			}
		}
		got := make([]float32, n*stride)
		mulPackedGeneric(&m, lo, hi, &a, got, stride)
		check("twin", got)
		if packKernel(typ, 1) != nil {
			clear(got)
			mulPacked(&m, lo, hi, &a, got, stride)
			check("kernel", got)
		}
	}
}

// BenchmarkPacked: one to 16 inputs times Q4_K, Q5_K and Q6_K rows, the file's
// layout (mulInt's kernels) and the packed one (mulPacked), on matrices
// that stay in L2 (256×2048), in L3 (2048×2048) and that stream from
// memory (16 of 2048×2048, 37.7 MB of Q4_K, taken in turn), one thread:
// weight bytes (the file's) per CPU-second, each input counting once.
func BenchmarkPacked(b *testing.B) {
	const cols = 2048
	r := rand.New(rand.NewPCG(45, 46))
	for _, typ := range packTypes {
		for _, sh := range []struct {
			name       string
			rows, mats int
		}{{"L2", 256, 1}, {"L3", 2048, 1}, {"memory", 2048, 16}} {
			ms := make([]Matrix, sh.mats)
			for i := range ms {
				ms[i] = Matrix{Rows: sh.rows, Cols: cols, Type: typ, Raw: randomRows(r, typ, sh.rows, cols, true)}
				ms[i].pack = packNew(typ, ms[i].Raw, sh.rows, cols)
			}
			for _, n := range []int{1, 2, 4, 16} {
				var a acts
				a.quantize(actOf(typ), randomInputs(r, n, cols), cols, n)
				out := make([]float32, n*sh.rows)
				for _, packed := range []bool{false, true} {
					if packed && packKernel(typ, 1) == nil {
						continue
					}
					b.Run(fmt.Sprintf("%s/%s/n=%d/packed=%v", typ, sh.name, n, packed), func(b *testing.B) {
						cpu0 := cpuTime()
						for i := 0; i < b.N; i++ {
							m := &ms[i%len(ms)]
							if packed {
								mulPacked(m, 0, m.Rows, &a, out, m.Rows)
							} else {
								mulInt(typ, m.Raw, &a, out, m.Rows)
							}
						}
						if cpu := cpuTime() - cpu0; cpu > 0 {
							b.ReportMetric(float64(len(ms[0].Raw)*n)*float64(b.N)/cpu/1e9, "GB/cpu-s")
						}
					})
				}
			}
		}
	}
}

// cpuTime is the process's CPU time in seconds (user + system).
func cpuTime() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// packNew is packMatrix into new memory.
func packNew(t Type, raw []byte, rows, cols int) []byte {
	return packMatrix(t, raw, rows, cols, make([]byte, rows/groupRows*cols/t.Block()*packBytes(t)))
}
