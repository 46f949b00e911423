package llama

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkMatVec measures one matrix (2048 × 2048, TinyLlama's attention
// projections) applied to n vectors per type: n=1 is a decode step's
// matrix-vector product, n=8 the batched kernels. It reports weights (in
// millions) applied per CPU-second as MW/s and the weight bytes read per
// second as GB/s (the matrix is 4 to 16 MB: it streams from memory).
func BenchmarkMatVec(b *testing.B) {
	const rows, cols = 2048, 2048
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []Type{F32, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, BF16} {
		m := Matrix{Rows: rows, Cols: cols, Type: typ}
		if typ == F32 {
			m.F = make([]float32, rows*cols)
			for i := range m.F {
				m.F[i] = float32(r.NormFloat64())
			}
		} else {
			m.Raw = randomRows(r, typ, rows, cols, true)
		}
		bytes := rows * 4 * cols
		if typ != F32 {
			bytes = len(m.Raw)
		}
		for _, n := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/n=%d", typ, n), func(b *testing.B) {
				x := make([]float32, n*cols)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				out := make([]float32, n*rows)
				var sums []float32
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					switch typ {
					case F32:
						mulF32(m.F, cols, x, n, out, rows)
					case Q8_0:
						mulQ8(m.Raw, cols, x, n, out, rows)
					default:
						if needsSums(typ) {
							sums = blockSums(sums, x, cols, n)
						}
						mulQuant(typ, m.Raw, cols, x, n, out, rows, sums)
					}
				}
				s := b.Elapsed().Seconds()
				b.ReportMetric(float64(rows*cols*n)*float64(b.N)/s/1e6, "MW/s")
				b.ReportMetric(float64(bytes)*float64(b.N)/s/1e9, "GB/s")
			})
		}
	}
}
