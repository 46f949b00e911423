package llama

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
)

// TestPackQ4KRoundTrip: every row of a packed matrix unpacks to the
// file's bytes (any bytes: the twin multiplies the unpacked rows).
func TestPackQ4KRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for trial := 0; trial < 20; trial++ {
		rows, nb := groupRows*(1+r.IntN(4)), 1+r.IntN(4)
		raw := randomRows(r, Q4_K, rows, nb*qkK, false)
		for i := range raw {
			if r.IntN(2) == 0 {
				raw[i] = byte(r.Uint32()) // scales' bytes included
			}
		}
		p := packQ4K(raw, rows, nb*qkK)
		row := make([]byte, nb*144)
		for i := 0; i < rows; i++ {
			g := i / groupRows
			unpackQ4KRow(p[g*nb*q4kPackBytes:(g+1)*nb*q4kPackBytes], i%groupRows, nb, row)
			if !bytes.Equal(row, raw[i*nb*144:(i+1)*nb*144]) {
				t.Fatalf("%d rows × %d super-blocks: row %d unpacks to other bytes", rows, nb, i)
			}
		}
	}
}

// TestPackedKernelsAgree: the packed kernel (where the CPU has one) and
// the packed twin give dotIntGeneric's bits on the file's rows, for every
// row range of whole groups, several inputs and strided outputs.
func TestPackedKernelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for trial := 0; trial < 60; trial++ {
		groups, nb := 1+r.IntN(5), 1+r.IntN(6)
		rows, cols := groups*groupRows, nb*qkK
		n := 1 + r.IntN(5)
		stride := rows + r.IntN(3)
		m := Matrix{Rows: rows, Cols: cols, Type: Q4_K, Raw: randomRows(r, Q4_K, rows, cols, trial%4 != 0)}
		m.pack = packQ4K(m.Raw, rows, cols)
		var a acts
		a.quantize(actQ8K, randomInputs(r, n, cols), cols, n)
		want := make([]float32, n*stride)
		mulIntGeneric(Q4_K, m.Raw, &a, want, stride)
		lo := groupRows * r.IntN(groups)
		hi := lo + groupRows*(1+r.IntN(groups-lo/groupRows))
		check := func(name string, got []float32) {
			t.Helper()
			for v := 0; v < n; v++ {
				for i := lo; i < hi; i++ {
					g, e := got[v*stride+i-lo], want[v*stride+i]
					if math.Float32bits(g) != math.Float32bits(e) && !(g != g && e != e) {
						t.Fatalf("%s: %d×%d rows %d..%d, %d inputs: out[%d][%d] = %v, generic %v", name, rows, cols, lo, hi, n, v, i, g, e)
					}
				}
			}
		}
		got := make([]float32, n*stride)
		mulPackedGeneric(&m, lo, hi, &a, got, stride)
		check("twin", got)
		if packKernel(Q4_K) != nil {
			clear(got)
			mulPacked(&m, lo, hi, &a, got, stride)
			check("kernel", got)
		}
	}
}

// BenchmarkPackedQ4K: one and 16 inputs times Q4_K rows, the file's
// layout (mulInt's kernels) and the packed one (mulPacked), on matrices
// that stay in L2 (256×2048), in L3 (2048×2048) and that stream from
// memory (16 of 2048×2048, 37.7 MB, taken in turn), one thread: weight
// bytes (the file's) per CPU-second, each input counting once.
func BenchmarkPackedQ4K(b *testing.B) {
	const cols = 2048
	r := rand.New(rand.NewPCG(45, 46))
	for _, sh := range []struct {
		name       string
		rows, mats int
	}{{"L2", 256, 1}, {"L3", 2048, 1}, {"memory", 2048, 16}} {
		ms := make([]Matrix, sh.mats)
		for i := range ms {
			ms[i] = Matrix{Rows: sh.rows, Cols: cols, Type: Q4_K, Raw: randomRows(r, Q4_K, sh.rows, cols, true)}
			ms[i].pack = packQ4K(ms[i].Raw, sh.rows, cols)
		}
		for _, n := range []int{1, 2, 4, 16} {
			var a acts
			a.quantize(actQ8K, randomInputs(r, n, cols), cols, n)
			out := make([]float32, n*sh.rows)
			for _, packed := range []bool{false, true} {
				if packed && packKernel(Q4_K) == nil {
					continue
				}
				b.Run(fmt.Sprintf("%s/n=%d/packed=%v", sh.name, n, packed), func(b *testing.B) {
					cpu0 := cpuTime()
					for i := 0; i < b.N; i++ {
						m := &ms[i%len(ms)]
						if packed {
							mulPacked(m, 0, m.Rows, &a, out, m.Rows)
						} else {
							mulInt(Q4_K, m.Raw, &a, out, m.Rows)
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

// cpuTime is the process's CPU time in seconds (user + system).
func cpuTime() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
