package synth

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/kvlease/kvlease/model"
	"github.com/kvlease/kvlease/tokenizer"
)

// The byte-level tokenizer's constants: token ids 0..255 are bytes,
// EOSToken ends a sequence.
const (
	EOSToken  = tokenizer.EOS
	VocabSize = tokenizer.VocabSize
)

// Profile describes a simulated model: its KV shape, its vocabulary and its
// latency model.
//
// The latency coefficients follow a roofline: a step costs
//
//	StepOverhead + DecodePerSeq × seqs + max(memory, compute)
//	memory  = DecodePerStep + DecodePerContextToken × Σ_seqs (Start+Count)
//	compute = PrefillPerToken × Σ_seqs Count + PrefillPerAttendedToken × Σ_positions (q+1)
//
// The Decode* terms are memory-bound work (streaming the weights once per
// step, reading each sequence's KV context); they dominate decode steps. The
// Prefill* terms are compute-bound work (about 2 × parameters FLOPs per
// token, plus attention, where position q attends to q+1 keys); they
// dominate prefill steps. A GPU overlaps the two, hence the max: decode
// tokens that ride along with a prefill chunk are nearly free, as in vLLM's
// chunked prefill. The model is monotone: adding a sequence, a token or
// context never shortens a step.
type Profile struct {
	Name string

	// KV shape. BytesPerToken = 2 (K and V) × Layers × KVHeads × HeadDim ×
	// DTypeBytes.
	Layers     int
	KVHeads    int
	HeadDim    int
	DTypeBytes int

	// MaxModelLen is the longest sequence (prompt plus output) the model
	// accepts. The executor does not enforce it; the engine does.
	MaxModelLen int

	// VocabSize and EOS: token ids 0..255 are bytes, EOS ends a sequence.
	VocabSize int
	EOS       int32
	// EOSProbability is the chance that a sampled token is EOS, independent
	// of the sampling parameters, so mean output length is 1/EOSProbability.
	EOSProbability float64

	// Latency coefficients; see the type comment.
	StepOverhead            time.Duration // per non-empty step
	DecodePerStep           time.Duration // per step: weights streamed from memory
	DecodePerSeq            time.Duration // per sequence in the step
	DecodePerContextToken   time.Duration // per KV token read (Start+Count per sequence)
	PrefillPerToken         time.Duration // per computed position
	PrefillPerAttendedToken time.Duration // per (query, key) pair of attention
}

// BytesPerToken is the KV size of one token across all layers.
func (p Profile) BytesPerToken() int { return 2 * p.Layers * p.KVHeads * p.HeadDim * p.DTypeBytes }

// Validate reports the first problem with p.
func (p Profile) Validate() error {
	switch {
	case p.Layers <= 0 || p.KVHeads <= 0 || p.HeadDim <= 0 || p.DTypeBytes <= 0:
		return fmt.Errorf("sim: profile %q: Layers, KVHeads, HeadDim and DTypeBytes must be positive", p.Name)
	case int64(p.Layers)*int64(p.KVHeads)*int64(p.HeadDim)*int64(p.DTypeBytes) > 1<<30:
		return fmt.Errorf("sim: profile %q: over 2 GiB of KV per token", p.Name)
	case p.MaxModelLen <= 0:
		return fmt.Errorf("sim: profile %q: MaxModelLen must be positive, got %d", p.Name, p.MaxModelLen)
	case p.VocabSize < VocabSize:
		return fmt.Errorf("sim: profile %q: VocabSize must be at least %d (256 bytes and EOS), got %d", p.Name, VocabSize, p.VocabSize)
	case p.EOS < 256 || int(p.EOS) >= p.VocabSize:
		return fmt.Errorf("sim: profile %q: EOS must be in [256, VocabSize), got %d", p.Name, p.EOS)
	case !(p.EOSProbability >= 0 && p.EOSProbability <= 1):
		return fmt.Errorf("sim: profile %q: EOSProbability must be in [0, 1], got %v", p.Name, p.EOSProbability)
	case p.StepOverhead < 0 || p.DecodePerStep < 0 || p.DecodePerSeq < 0 || p.DecodePerContextToken < 0 ||
		p.PrefillPerToken < 0 || p.PrefillPerAttendedToken < 0:
		return fmt.Errorf("sim: profile %q: latency coefficients must not be negative", p.Name)
	}
	return nil
}

// Duration is how long b takes on the modelled hardware (see Profile). An
// empty batch takes 0. Negative Start or Count count as 0; the arithmetic
// saturates instead of overflowing, so any batch gives a non-negative
// duration. It is exact integer arithmetic: the same on every platform.
func (p Profile) Duration(b *model.Batch) time.Duration {
	if b == nil || len(b.Seqs) == 0 {
		return 0
	}
	var tokens, context, attended int64
	for i := range b.Seqs {
		s := &b.Seqs[i]
		start, count := max(int64(s.Start), 0), max(int64(s.Count), 0)
		tokens = addSat(tokens, count)
		context = addSat(context, addSat(start, count))
		// Σ_{q=start}^{start+count-1} (q+1) = count×start + count(count+1)/2.
		tri := count * (count + 1) / 2
		if count > 3e9 {
			tri = math.MaxInt64
		}
		attended = addSat(attended, addSat(mulSat(count, start), tri))
	}
	memory := addSat(int64(p.DecodePerStep), mulSat(int64(p.DecodePerContextToken), context))
	compute := addSat(mulSat(int64(p.PrefillPerToken), tokens), mulSat(int64(p.PrefillPerAttendedToken), attended))
	d := addSat(int64(p.StepOverhead), mulSat(int64(p.DecodePerSeq), int64(len(b.Seqs))))
	return time.Duration(addSat(d, max(memory, compute)))
}

// mulSat and addSat are for non-negative operands.
func mulSat(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// The built-in profiles.
//
// llama-8b is Llama-3.1-8B's shape (32 layers, 8 KV heads of dim 128, bf16:
// 128 KiB of KV per token, 2 MiB per 16-token block) on one H100 SXM
// (989 TFLOPS dense bf16, 3.35 TB/s HBM3). The timings are roofline
// estimates, checked against published measurements:
//
//   - DecodePerStep 6 ms: 16.1 GB of bf16 weights at ~80% of 3.35 TB/s is
//     6.0 ms. Published single-stream measurements of 7-8B fp16 models on an
//     H100 are about 6 ms per token (170 tok/s), against a 4.2-4.8 ms pure
//     bandwidth bound (e.g. microscale.academy "memory wall"; jared-hpc.com
//     "roofline model for LLM inference").
//   - DecodePerContextToken 48 ns: 128 KiB per token at ~80% of 3.35 TB/s.
//   - DecodePerSeq 20 µs: per-sequence sampling, logits and scheduling work
//     that does not overlap the weight stream; with it a 64-sequence decode
//     step at 1k context takes ~11 ms and a 256 × 512 step ~18 ms, in line
//     with vLLM's reported inter-token latencies for 8B models on H100 under
//     load (Azure HPC blog "Performance of Llama 3.1 8B using vLLM on
//     ND-H100-v5", 2025).
//   - PrefillPerToken 27 µs: 2 × 8.03e9 FLOPs per token at ~60% MFU (~590
//     TFLOPS): 1k prompt tokens take ~28 ms.
//   - PrefillPerAttendedToken 1 ns: 4 × 32 layers × 32 query heads × 128 =
//     524k FLOPs per (query, key) pair at ~500 TFLOPS (FlashAttention-3);
//     an 8k prompt spends ~34 ms in attention next to ~220 ms in the MLPs.
//   - StepOverhead 0.5 ms: scheduling and input preparation with CUDA graphs.
//
// tiny is a 2-layer toy (256 B of KV per token) whose steps take a few
// milliseconds, so tests and demos are quick. zero has tiny's shape and no
// latency at all, for measuring kvlease's own overhead.
var profiles = map[string]Profile{
	"zero": {
		Name: "zero", Layers: 2, KVHeads: 2, HeadDim: 16, DTypeBytes: 2,
		MaxModelLen: 8192, VocabSize: VocabSize, EOS: EOSToken, EOSProbability: 1.0 / 96,
	},
	"tiny": {
		Name: "tiny", Layers: 2, KVHeads: 2, HeadDim: 16, DTypeBytes: 2,
		MaxModelLen: 8192, VocabSize: VocabSize, EOS: EOSToken, EOSProbability: 1.0 / 96,
		StepOverhead:            500 * time.Microsecond,
		DecodePerStep:           time.Millisecond,
		DecodePerSeq:            5 * time.Microsecond,
		DecodePerContextToken:   time.Nanosecond,
		PrefillPerToken:         2 * time.Microsecond,
		PrefillPerAttendedToken: time.Nanosecond,
	},
	"llama-8b": {
		Name: "llama-8b", Layers: 32, KVHeads: 8, HeadDim: 128, DTypeBytes: 2,
		MaxModelLen: 131072, VocabSize: VocabSize, EOS: EOSToken, EOSProbability: 1.0 / 256,
		StepOverhead:            500 * time.Microsecond,
		DecodePerStep:           6 * time.Millisecond,
		DecodePerSeq:            20 * time.Microsecond,
		DecodePerContextToken:   48 * time.Nanosecond,
		PrefillPerToken:         27 * time.Microsecond,
		PrefillPerAttendedToken: time.Nanosecond,
	},
}

// LookupProfile returns the built-in profile called name (a copy: changing
// it changes nothing else).
func LookupProfile(name string) (Profile, bool) {
	p, ok := profiles[name]
	return p, ok
}

// ProfileNames are the built-in profiles' names, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
