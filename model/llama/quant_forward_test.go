package llama_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/kvlease/kvlease/internal/llamatest"
	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/model/gguf"
	"github.com/kvlease/kvlease/model/llama"
)

// kShape has widths that are whole K-quant super-blocks (dim 256) and one
// that is not (ffn_down's 576 columns), so a Q4_K_M layout has K-quants
// and llama-quantize's fallbacks.
var kShape = llama.Config{Dim: 256, HiddenDim: 576, Layers: 2, Heads: 4, KVHeads: 2, VocabSize: 512, MaxSeqLen: 512}

// forwardMatchesReference runs a prompt in chunks of 5 over blocks of 4
// tokens, then decode steps, comparing each step's logits with the
// float64 reference over the same (decoded) weights and the same
// rounding of the inputs of the integer kernels' matrices. Where inputs
// are rounded the tolerance is 1e-2 × (1 + max |logit|) instead of 1e-3:
// the reference rounds its own float64 activations, and an input within
// float32 noise of a half step rounds the other way there, moving by a
// whole step (1/127 of its block's largest) and every later activation
// with it. The distance to the reference with exact inputs (what the
// rounding costs) is checked too, within 3e-2 × (1 + max |logit|), and
// logged.
func forwardMatchesReference(t *testing.T, w *llama.Weights) {
	t.Helper()
	h := newHarness(t, w, 64, 4, nil)
	prompt := []int32{1, 17, 300, 5, 5, 42, 99, 511, 3, 250, 12}
	s := h.newSeq(1, prompt, model.Sampling{})
	for s.computed+5 < len(s.tokens) {
		h.step([]*seq{s}, []int{5})
	}
	tol := 1e-3
	if roundsInputs(w) {
		tol = 1e-2
	}
	worst, worstUn := 0.0, 0.0
	for i := 0; i < 4; i++ {
		h.step([]*seq{s}, []int{len(s.tokens) - s.computed})
		got := h.exec.Logits(0)
		worst = max(worst, compareLogits(t, got, reference(w, s.tokens[:len(s.tokens)-1]), tol))
		if roundsInputs(w) {
			worstUn = max(worstUn, compareLogits(t, got, referenceUnrounded(w, s.tokens[:len(s.tokens)-1]), 3e-2))
		}
	}
	if roundsInputs(w) {
		t.Logf("max |Δlogit| / (1 + max |logit|): %.2g from the reference with rounded inputs, %.2g from exact inputs", worst, worstUn)
	}
}

// roundsInputs reports whether some matrix of w multiplies rounded inputs.
func roundsInputs(w *llama.Weights) bool {
	r := func(m *llama.Matrix) bool {
		x := make([]float32, m.Cols)
		for i := range x {
			x[i] = float32(i%7) + 0.3
		}
		return llama.RoundedInputs(m.Type, x)[1] != float64(x[1])
	}
	for i := range w.Layers {
		L := &w.Layers[i]
		for _, m := range []*llama.Matrix{&L.Wq, &L.Wk, &L.Wv, &L.Wo, &L.W1, &L.W2, &L.W3} {
			if r(m) {
				return true
			}
		}
	}
	return r(&w.Output)
}

// TestQuantizedForwardMatchesReference: models whose matrices are each
// quantised type, and llama-quantize's Q4_K_M and Q5_K_M layouts (with
// their fallbacks), compute the float64 reference's logits over their
// decoded weights.
func TestQuantizedForwardMatchesReference(t *testing.T) {
	for _, typ := range []llama.Type{llama.Q4_0, llama.Q4_1, llama.Q5_0, llama.Q5_1, llama.Q4_K, llama.Q5_K, llama.Q6_K, llama.BF16} {
		t.Run(typ.String(), func(t *testing.T) {
			w := llamatest.Random(kShape, 7, false)
			llamatest.Quantize(w, typ)
			if w.Layers[0].Wq.Type != typ {
				t.Fatalf("Wq is %s", w.Layers[0].Wq.Type)
			}
			forwardMatchesReference(t, w)
		})
	}
	for _, c := range []struct {
		name  string
		typ   llama.Type
		shape llama.Config
	}{
		{"Q4_K_M", llama.Q4_K, kShape}, {"Q5_K_M", llama.Q5_K, kShape},
		{"Q4_K_M-narrow", llama.Q4_K, withHidden(llamatest.Shape260K, 192)},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := llamatest.Random(c.shape, 8, false)
			llamatest.QuantizeKM(w, c.typ)
			forwardMatchesReference(t, w)
		})
	}
}

// TestQ4KMFileMatchesReference: a Q4_K_M-layout GGUF file written by
// llamatest loads through model/gguf (every type it holds) and computes
// the float64 reference's logits.
func TestQ4KMFileMatchesReference(t *testing.T) {
	w := llamatest.Random(kShape, 9, false)
	llamatest.QuantizeKM(w, llama.Q4_K)
	v := llamatest.SPMVocab(kShape.VocabSize)
	var b bytes.Buffer
	if err := llamatest.WriteGGUF(&b, w, llamatest.GGUFOptions{Vocab: &v}); err != nil {
		t.Fatal(err)
	}
	lw := loadGGUF(t, b.Bytes())
	want := map[string]bool{"Q4_K": true, "Q6_K": true, "Q5_0": true, "Q8_0": true}
	for typ := range fileTypes(t, b.Bytes()) {
		delete(want, typ)
	}
	if len(want) > 0 {
		t.Fatalf("the file has no tensors of %v", want)
	}
	forwardMatchesReference(t, lw)
}

func loadGGUF(t *testing.T, b []byte) *llama.Weights {
	t.Helper()
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	w, err := gguf.Llama(f)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// fileTypes counts a GGUF file's tensors by ggml type name.
func fileTypes(t *testing.T, b []byte) map[string]int {
	f, err := gguf.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, tn := range f.Tensors {
		n[llama.Type(tn.Type).String()]++
	}
	return n
}

// TestLlamaQuantizeFilesLoad (with KVLEASE_LLAMACPP, a llama.cpp tree
// with its build): an F32 file written here, quantised by llama-quantize
// to each of the file types people download, loads (every tensor type
// llama-quantize chose) and computes the float64 reference's logits over
// llama.cpp's quants. kShape has K-quant widths and a fallback width.
func TestLlamaQuantizeFilesLoad(t *testing.T) {
	dir := os.Getenv("KVLEASE_LLAMACPP")
	if dir == "" {
		t.Skip("KVLEASE_LLAMACPP (a llama.cpp tree with build/bin/llama-quantize) not set")
	}
	bin := filepath.Join(dir, "build", "bin", "llama-quantize")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no llama-quantize: %v", err)
	}
	w := llamatest.Random(kShape, 10, false)
	v := llamatest.SPMVocab(kShape.VocabSize)
	var b bytes.Buffer
	if err := llamatest.WriteGGUF(&b, w, llamatest.GGUFOptions{Vocab: &v}); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	in := filepath.Join(tmp, "f32.gguf")
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ft := range []string{"Q4_K_M", "Q5_K_M", "Q4_K_S", "Q5_K_S", "Q6_K", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16"} {
		t.Run(ft, func(t *testing.T) {
			out := filepath.Join(tmp, ft+".gguf")
			if msg, err := exec.Command(bin, in, out, ft).CombinedOutput(); err != nil {
				t.Fatalf("llama-quantize %s: %v\n%s", ft, err, msg)
			}
			qb, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			types := fileTypes(t, qb)
			names := make([]string, 0, len(types))
			for n, c := range types {
				names = append(names, fmt.Sprintf("%s×%d", n, c))
			}
			sort.Strings(names)
			t.Logf("llama-quantize %s wrote %v", ft, names)
			forwardMatchesReference(t, loadGGUF(t, qb))
		})
	}
}

// TestQuantizersRoundTrip: llamatest's quantisers write blocks that
// decode close to their input (the RMS error relative to the weights'
// RMS within what each type's bits allow).
func TestQuantizersRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, c := range []struct {
		typ llama.Type
		tol float64
	}{
		{llama.Q4_0, 0.12}, {llama.Q4_1, 0.1}, {llama.Q5_0, 0.06}, {llama.Q5_1, 0.05},
		{llama.Q4_K, 0.12}, {llama.Q5_K, 0.06}, {llama.Q6_K, 0.03}, {llama.Q8_0, 0.01}, {llama.BF16, 0.003},
	} {
		m := llama.Matrix{Rows: 8, Cols: 512, Type: llama.F32, F: make([]float32, 8*512)}
		for i := range m.F {
			m.F[i] = float32(r.NormFloat64())
		}
		q := llamatest.QuantizeMatrix(m, c.typ)
		if q.Type != c.typ {
			t.Fatalf("%s: got %s", c.typ, q.Type)
		}
		row := make([]float32, m.Cols)
		se, ss := 0.0, 0.0
		for i := 0; i < m.Rows; i++ {
			q.Row(i, row)
			for j, v := range row {
				d := float64(v - m.F[i*m.Cols+j])
				se += d * d
				ss += float64(m.F[i*m.Cols+j]) * float64(m.F[i*m.Cols+j])
			}
		}
		if e := math.Sqrt(se / ss); e > c.tol {
			t.Errorf("%s: relative RMS error %.4f > %g", c.typ, e, c.tol)
		}
	}
}

// TestPackedWeightsKeepLogits: a Q4_K_M and a Q5_K_M model with their
// packed copies (Weights.Pack: one- to three-input steps read them where
// the CPU has the kernels) give the logits of the same model without, bit
// for bit,
// over prompt chunks of one to seven tokens and decode steps; and the
// batching invariants hold on it.
func TestPackedWeightsKeepLogits(t *testing.T) {
	for _, typ := range []llama.Type{llama.Q4_K, llama.Q5_K} {
		t.Run(typ.String(), func(t *testing.T) { packedKeepsLogits(t, typ) })
	}
}

func packedKeepsLogits(t *testing.T, typ llama.Type) {
	w := llamatest.Random(kShape, 9, false)
	llamatest.QuantizeKM(w, typ)
	wp := *w
	wp.Layers = slices.Clone(w.Layers)
	wp.Pack(nil)
	prompt := []int32{1, 17, 300, 5, 5, 42, 99, 511, 3, 250, 12, 7, 8, 9, 10, 11}
	r := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 4; trial++ {
		hs := []*harness{newHarness(t, w, 64, 4, nil), newHarness(t, &wp, 64, 4, nil)}
		ss := []*seq{hs[0].newSeq(1, prompt, model.Sampling{}), hs[1].newSeq(1, prompt, model.Sampling{})}
		for step := 0; step < 12; step++ {
			n := min(1+r.IntN(7), len(ss[0].tokens)-ss[0].computed)
			for i := range hs {
				hs[i].step([]*seq{ss[i]}, []int{n})
			}
			if ss[0].computed < len(ss[0].tokens) {
				continue // no logits before the prompt's last position
			}
			a, b := hs[0].exec.Logits(0), hs[1].exec.Logits(0)
			for j := range a {
				if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
					t.Fatalf("trial %d step %d (%d tokens): logit %d is %v packed, %v not", trial, step, n, j, b[j], a[j])
				}
			}
		}
	}
	batchingKeepsTokens(t, &wp)
}
