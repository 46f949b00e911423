package llama_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/llama"
	"github.com/kvlease/kvlease/model/llamafile"
)

// benchDecode measures decode steps of batch sequences, each at a context
// of ctxLen tokens: every step recomputes each sequence's last position
// (same work as a decode step at that context, without growing it). It
// reports tokens/s over the whole batch.
func benchDecode(b *testing.B, shape llama.Config, typ llama.Type, batch, ctxLen, threads int) {
	w := llamatest.Random(shape, 1, false)
	llamatest.Quantize(w, typ)
	benchDecodeWeights(b, w, batch, ctxLen, threads)
}

func benchDecodeWeights(b *testing.B, w *llama.Weights, batch, ctxLen, threads int) {
	shape := w.Config
	var run llama.Runner
	if threads > 1 {
		wk := llamafile.NewWorkers(threads)
		defer wk.Close()
		run = wk
	}
	bs := 16
	pool := kvblock.New(kvblock.Config{NumBlocks: batch * (ctxLen/bs + 1), BlockSizeTokens: bs, BytesPerToken: w.Config.BytesPerToken()})
	e, err := llama.New(w, pool, run)
	if err != nil {
		b.Fatal(err)
	}
	var bt model.Batch
	for i := 0; i < batch; i++ {
		h := pool.NewHold(kvblock.HoldRequest, uint64(i))
		pool.Allocate(h, (ctxLen+bs-1)/bs)
		toks := make([]int32, ctxLen)
		for j := range toks {
			toks[j] = int32((i*7919 + j*31) % shape.VocabSize)
		}
		bt.Seqs = append(bt.Seqs, model.Seq{Req: uint64(i), Tokens: toks, Start: 0, Count: ctxLen, Blocks: pool.Blocks(h), Sample: true})
	}
	var out model.StepResult
	e.Execute(&bt, &out) // prefill the contexts
	for i := range bt.Seqs {
		bt.Seqs[i].Start, bt.Seqs[i].Count = ctxLen-1, 1
	}
	e.Execute(&bt, &out)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for i := 0; i < b.N; i++ {
		e.Execute(&bt, &out)
	}
	report(b, batch*b.N, cpu0)
}

// cpuSeconds is the process's CPU time (user + system). On a shared,
// loaded machine wall-clock rates understate the code's speed; tokens per
// CPU-second do not depend on how much of the machine others take (with
// threads > 1 they count every worker's time).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func report(b *testing.B, tokens int, cpu0 float64) {
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
	if cpu := cpuSeconds() - cpu0; cpu > 0 {
		b.ReportMetric(float64(tokens)/cpu, "tok/cpu-s")
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, s := range []struct {
		name  string
		shape llama.Config
		typ   llama.Type
	}{
		{"15M", llamatest.Shape15M, llama.F32},
		{"15M-q8", llamatest.Shape15M, llama.Q8_0},
		{"42M", llamatest.Shape42M, llama.F32},
	} {
		for _, batch := range []int{1, 16} {
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/batch=%d/threads=%d", s.name, batch, threads), func(b *testing.B) {
					benchDecode(b, s.shape, s.typ, batch, 64, threads)
				})
			}
		}
	}
}

// BenchmarkDecodeFile is BenchmarkDecode on the model file that
// KVLEASE_BENCH_MODEL names (a GGUF file, say a TinyLlama-shaped Q4_K_M
// one): one sequence and a batch of 16 at a context of 64, one and two
// threads.
func BenchmarkDecodeFile(b *testing.B) {
	path := os.Getenv("KVLEASE_BENCH_MODEL")
	if path == "" {
		b.Skip("KVLEASE_BENCH_MODEL (a GGUF file) not set")
	}
	m, err := llamafile.Open(path, "")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	for _, batch := range []int{1, 16} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("batch=%d/threads=%d", batch, threads), func(b *testing.B) {
				benchDecodeWeights(b, m.Weights, batch, 64, threads)
			})
		}
	}
}

// BenchmarkPrefill512 measures one 512-token prompt computed in one step
// (and, as 42M-1024, one of 1,024 tokens: the prompt of
// BenchmarkRealKVTransfer42M, where attention's share is larger).
func BenchmarkPrefill512(b *testing.B) {
	for _, s := range []struct {
		name  string
		shape llama.Config
		n     int
	}{{"15M", llamatest.Shape15M, 512}, {"42M", llamatest.Shape42M, 512}, {"42M-1024", llamatest.Shape42M, 1024}} {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", s.name, threads), func(b *testing.B) {
				w := llamatest.Random(s.shape, 1, false)
				var run llama.Runner
				if threads > 1 {
					wk := llamafile.NewWorkers(threads)
					defer wk.Close()
					run = wk
				}
				pool := kvblock.New(kvblock.Config{NumBlocks: s.n/16 + 1, BlockSizeTokens: 16, BytesPerToken: w.Config.BytesPerToken()})
				e, err := llama.New(w, pool, run)
				if err != nil {
					b.Fatal(err)
				}
				h := pool.NewHold(kvblock.HoldRequest, 1)
				pool.Allocate(h, s.n/16)
				toks := make([]int32, s.n)
				for j := range toks {
					toks[j] = int32(j * 61 % s.shape.VocabSize)
				}
				bt := model.Batch{Seqs: []model.Seq{{Req: 1, Tokens: toks, Count: s.n, Blocks: pool.Blocks(h), Sample: true}}}
				var out model.StepResult
				b.ResetTimer()
				cpu0 := cpuSeconds()
				for i := 0; i < b.N; i++ {
					e.Execute(&bt, &out)
				}
				report(b, s.n*b.N, cpu0)
			})
		}
	}
}

// BenchmarkPromptFile measures a 512-token prompt computed in one step
// (llama-bench's pp512: its default batch computes such a prompt at once)
// on the model file KVLEASE_BENCH_MODEL (a GGUF or llama2.c checkpoint),
// with KVLEASE_BENCH_THREADS workers (default 2). It skips without the
// file: compare with `llama-bench -m FILE -p 512 -n 0 -t 2` on the same
// file.
func BenchmarkPromptFile(b *testing.B) {
	path := os.Getenv("KVLEASE_BENCH_MODEL")
	if path == "" {
		b.Skip("set KVLEASE_BENCH_MODEL to a GGUF file (and KVLEASE_BENCH_THREADS, default 2)")
	}
	threads := 2
	if s := os.Getenv("KVLEASE_BENCH_THREADS"); s != "" {
		var err error
		if threads, err = strconv.Atoi(s); err != nil || threads < 1 {
			b.Fatalf("KVLEASE_BENCH_THREADS=%q: want a positive number", s)
		}
	}
	m, err := llamafile.Open(path, "")
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const n, bs = 512, 16
	w := m.Weights
	wk := llamafile.NewWorkers(threads)
	defer wk.Close()
	pool := kvblock.New(kvblock.Config{NumBlocks: n/bs + 1, BlockSizeTokens: bs, BytesPerToken: w.Config.BytesPerToken()})
	e, err := llama.New(w, pool, wk)
	if err != nil {
		b.Fatal(err)
	}
	h := pool.NewHold(kvblock.HoldRequest, 1)
	pool.Allocate(h, n/bs)
	toks := make([]int32, n)
	for j := range toks {
		toks[j] = int32((j*7919 + 3) % w.Config.VocabSize)
	}
	bt := model.Batch{Seqs: []model.Seq{{Req: 1, Tokens: toks, Count: n, Blocks: pool.Blocks(h), Sample: true}}}
	var out model.StepResult
	e.Execute(&bt, &out) // page the file in
	b.ResetTimer()
	cpu0 := cpuSeconds()
	for i := 0; i < b.N; i++ {
		e.Execute(&bt, &out)
	}
	report(b, n*b.N, cpu0)
}

// BenchmarkMatVec measures one 2048 × 2048 matrix (TinyLlama's attention
// projections; 2 to 16 MB, so it streams from memory) of each type applied
// to one vector (a decode step's matrix-vector product: the one-row
// kernels), to eight (the batched kernels) and to 64 (a prompt), one
// thread. It reports
// weights applied per CPU-second (Mw/cpu-s, millions; n=8 counts each
// weight n times) and weight bytes read per CPU-second.
func BenchmarkMatVec(b *testing.B) {
	benchMatVec(b, 2048, 2048, []llama.Type{llama.F32, llama.F16, llama.BF16, llama.Q8_0, llama.Q6_K, llama.Q5_K, llama.Q5_1, llama.Q5_0, llama.Q4_K, llama.Q4_1, llama.Q4_0}, []int{1, 8, 64})
}

// BenchmarkMatVecDRAM is BenchmarkMatVec on a matrix larger than this
// machine's caches (32768×2048: 71 MB as Q8_0), as a decode step's weights
// are: sixteen inputs are a decode step of sixteen sequences, where a
// kernel that waits on memory shows (BenchmarkMatVec's 4 MB matrix stays
// in L3). Q4_K and Q6_K also in their packed layout at n=1 (the layout a
// one-sequence decode step reads; Weights.Pack), Q4_K at n=16 too (its
// packed kernels take every step).
func BenchmarkMatVecDRAM(b *testing.B) {
	benchMatVec(b, 32768, 2048, []llama.Type{llama.Q8_0, llama.Q6_K, llama.Q5_0, llama.Q4_K, llama.Q4_0}, []int{1, 16})
}

func benchMatVec(b *testing.B, rows, cols int, types []llama.Type, ns []int) {
	r := rand.New(rand.NewPCG(1, 2))
	f := llama.Matrix{Rows: rows, Cols: cols, Type: llama.F32, F: make([]float32, rows*cols)}
	for i := range f.F {
		f.F[i] = float32(r.NormFloat64()) / 45
	}
	for _, typ := range types {
		m := llamatest.QuantizeMatrix(f, typ)
		size := 4 * rows * cols
		if typ != llama.F32 {
			size = len(m.Raw)
		}
		for _, n := range ns {
			benchMatVecOne(b, r, fmt.Sprintf("%s/n=%d", typ, n), m, size, n)
			if p := llama.Packed(m); p != nil && (n == 1 || typ == llama.Q4_K || typ == llama.Q8_0 || typ == llama.Q4_0 || typ == llama.Q5_0) && rows > 2048 {
				benchMatVecOne(b, r, fmt.Sprintf("%s-packed/n=%d", typ, n), *p, size, n)
			}
		}
	}
}

func benchMatVecOne(b *testing.B, r *rand.Rand, name string, m llama.Matrix, size, n int) {
	rows, cols := m.Rows, m.Cols
	b.Run(name, func(b *testing.B) {
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		out := make([]float32, n*rows)
		var sums []float32
		b.ResetTimer()
		cpu0 := cpuSeconds()
		for i := 0; i < b.N; i++ {
			sums = llama.MatVec(&m, x, n, out, sums)
		}
		if cpu := cpuSeconds() - cpu0; cpu > 0 {
			b.ReportMetric(float64(rows*cols*n)*float64(b.N)/cpu/1e6, "Mw/cpu-s")
			b.ReportMetric(float64(size)*float64(b.N)/cpu/1e9, "GB/cpu-s")
		}
	})
}
