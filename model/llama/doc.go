// Package llama is a llama-family transformer on the CPU (Llama 2/3.x,
// Qwen2/2.5, Qwen3): a model.Executor whose keys and values live in the
// kvblock pool's slots.
//
// # What it computes
//
// Token embedding, then per layer RMSNorm, the Q, K and V projections (plus
// their biases when the model has them: Qwen2), an RMSNorm of each query and
// key head when the model has one (Qwen3), RoPE (on adjacent pairs or on
// halves per Config.Rope, the file's theta, Llama 3.1's per-pair frequency
// factors and linear scaling when the file has them), causal grouped-query
// attention over heads of Config.HeadDim, the output projection and a
// SwiGLU feed-forward, each with its residual; then the final norm and the
// classifier, only for the positions that sample. Biases, head norms and
// RoPE are element-wise, one rounding per operation, identical on every
// path; the head norm's sum of squares is RMSNorm's reduction.
// Weights are matrices (Matrix) of F32, F16, BF16 or one of ggml's
// quantisations Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K (the
// types of llama-quantize's Q4_0 … Q8_0, Q4_K_M and Q5_K_M files; others
// are refused by their ggml name), possibly aliasing a memory-mapped file;
// package model/gguf and model/llama2c load them. Quantised weights are
// decoded inside the dot products. The inputs of Q8_0, Q4_0, Q5_0, Q4_K,
// Q5_K and Q6_K matrices are rounded to 8-bit blocks first, as llama.cpp rounds them (see
// actKind), and multiplied in integers; the other types multiply float32
// inputs.
//
// # KV in the pool
//
// Every computed position's K and V are written into its slot of the
// request's block table, and attention reads every position's K and V back
// from the pool — a chunk's own positions included, after the whole chunk's
// layer is written. One slot (kvblock's BytesPerToken = Config.BytesPerToken)
// is laid out as
//
//	[layer 0: K [kv head 0: head dim floats] … [kv head H-1], V [kv heads]] … [layer L-1]
//
// in float32 little-endian, so a block is BlockSizeTokens such slots in
// position order. Once a position's last layer is written its slot digest
// (kvblock.SlotDigest) goes into the pool: a block sent to another engine is
// checked against it, and a block freed early, overwritten or corrupted
// changes the logits of every later position.
//
// # Bit-exact regardless of batching
//
// A request's logits depend only on its tokens and its KV: never on the
// other requests of a batch, on chunk boundaries or on preemption and
// recompute. Every reduction runs in one fixed order per position, and
// every path that computes it — the one-vector vector kernel, the batched
// ones (each weight row applied to eight or four inputs per load: mulF32,
// mulInt, mulQuant), the F32 prompt kernel (register tiles of four rows
// times three inputs, three times four with AVX2 only, whose lanes wait
// in a worker's scratch between blocks of columns: mulF32Prompt;
// attention's scores4), the remainder path and the pure-Go twin used
// where the CPU has no vector kernels (see Kernels per architecture
// below) or the length does not suit the kernel — performs the same
// operations in that order, each rounded the same way; each type has one
// path, its twin the specification:
//
//   - F32 matrix rows and RMSNorm's sum of squares (dot32Generic): 32 lanes
//     by index mod 32, each lane a chain of fused multiply-adds (the product
//     is not rounded; each step is rounded once to float32), the lanes
//     combined by a fixed tree. The kernels use VFMADD231PS (amd64) or
//     FMLA (arm64); the Go twin
//     uses fma32, an exact single-precision fused multiply-add (not
//     float32(math.FMA(…)), which rounds twice and differs in rare cases),
//     checked against the CPU's instruction and against exact arithmetic.
//   - Q8_0, Q4_0, Q5_0, Q4_K, Q5_K and Q6_K rows (dotIntGeneric;
//     quantint_amd64.s, and quantint_arm64.s for Q8_0): the input row is rounded once per
//     matrix product (acts, per row: the rounding of one position never
//     depends on another), and each group of 32 weights times its 32
//     rounded inputs is eight exact int32 lane sums, so the kernels order
//     the integer work as suits them (the K-quants' sub-block scales
//     applied in int32 too). The float steps are fixed. Q8_0, Q4_0 and
//     Q5_0: one integer per row and block, I = Σ w·x over its 32 weights,
//     and one fused step, acc = fma(float32(d_w·d_x), float32(I), acc),
//     blocks in order; the result acc. Q4_K and Q5_K: one integer per row
//     and super-block — I, the sum of the scaled lanes, and M, the
//     minimums times the inputs' sums of 16 — and two fused steps into one
//     accumulator, acc = fma(float32(d·d_x), float32(I), acc) then acc =
//     fma(−float32(dmin·d_x), float32(M), acc), which is the result. Q6_K:
//     per super-block one fused multiply-add of float32(d·d_x) and
//     float32(lane) into each of eight accumulators, then hsum8. A kernel
//     may split I and M over lanes, inputs or rows interleaved in a
//     register as suits it, and pays one or two float steps per row and
//     block (eight lanes cost eight conversions and fused steps, which
//     bound the batched kernels on the multiplying pipes). Packed rows
//     (Weights.Pack) are the same bytes rearranged: the same integers, the
//     same float steps.
//   - Q4_1 and Q5_1 rows (dotQuantGeneric; the vector kernels in
//     quant_amd64.s): eight lanes. A quant (q ≥ 0) is converted exactly to
//     float32. Per 32-weight block, lane j starts a chain with the rounded
//     product of weight j and its input, then fused multiply-adds weights
//     8+j, 16+j, 24+j, and adds the chain times the block's scale d into
//     its accumulator by one more fused multiply-add; even blocks go to
//     one accumulator, odd ones to a second, added lane by lane at the
//     end. The minimums are apart: m × sum32(the block's inputs) chained
//     over the even and over the odd blocks in one scalar fused
//     multiply-add each, their sum added to hsum8 of the accumulators.
//     sum32 is (x[j]+x[8+j]) + (x[16+j]+x[24+j]) per lane, then hsum8;
//     hsum8 of eight lanes is (h0+h2)+(h1+h3) with h_j = a_j + a_{j+4}.
//     The kernels take the sums precomputed once per input (blockSums),
//     the twin computes them in place: the same values.
//   - BF16 rows: dot32Generic's order over the weights, each widened to
//     float32 exactly.
//   - F16 rows (four lanes), attention scores (four lanes by index mod 4,
//     combined as (l0+l1)+(l2+l3)), softmax sums and the weighted sum of
//     values (in position order): every product is rounded to float32
//     before it is added — VMULPS then VADDPS (amd64) or FMUL then FADD
//     (arm64) in the kernels, an explicit conversion float32(x*y) in Go.
//
// The rule for a change: a reduction fuses every multiply-add or none, on
// every path. A fused step is written fma32(x, y, z), never x*y + z (Go
// fuses that on some platforms and not on others); an unfused one
// float32(x*y) + z, whose conversion forbids the fusion. So the bits are
// the same with or without the vector kernels, and the tests compare
// every kernel with its twin bit for bit.
//
// # Kernels per architecture
//
//   - amd64 with AVX2 and FMA (dot_amd64.s, quant_amd64.s, tile_amd64.s):
//     the F32, BF16 and quantised kernels, integer ones for Q8_0, Q4_0,
//     Q5_0 and the K-quants (quantint_amd64.s, with VPDPBUSD and VPDPWSSD
//     where the CPU has AVX512-VNNI; F16 rows take the pure-Go twin); the inputs'
//     rounding to Q8_0 and Q8_K blocks (quantact_amd64.s) and attention's
//     scores one query at a time;
//     AVX-512 adds the eight-input F32 kernel, and with VL the 4 × 3 F32 prompt tile
//     and scores4 (four queries at a time). With AVX-512 F, BW, VL and
//     VNNI, Q4_K, Q5_K, Q6_K, Q8_0, Q4_0 and Q5_0 (this one with BITALG
//     too) matrices whose rows are a multiple of eight also get a packed
//     copy (Weights.Pack, called by model/llamafile; pack.go describes the
//     layouts: eight rows' scales of a block together). Q4_K's, Q8_0's,
//     Q4_0's and Q5_0's put four quants of each of the eight rows in 32
//     bytes, one lane per row, and every step reads them, one, four or
//     eight inputs at a time (packq4k_amd64.s, packq8_amd64.s); Q5_K's and
//     Q6_K's keep two rows' quants per 64-byte line, read by steps of one
//     to three inputs with one-input kernels (pack_amd64.s). The twin
//     unpacks a row to the file's bytes. AVX2-only CPUs and arm64 keep the
//     file's layout.
//   - arm64 (dot_arm64.s, tile_arm64.s, quantint_arm64.s; NEON, which
//     every arm64 CPU has): the F32 kernels (one row or a block of rows
//     times one vector, dotF32 and RMSNorm's sum of squares included, and
//     times four; the 3 × 4 prompt tile, in four passes of eight lanes),
//     attention's scores, scores4 and weighted sum of values; F16 and BF16
//     rows times one vector; the integer kernels of Q8_0, Q4_0 and Q5_0
//     (one input and four), Q4_K, Q5_K and Q6_K (one input), their lanes
//     by SDOT where the CPU has the DotProd extension, else by SMULL,
//     SADDLP and ADDP. Q4_1 and Q5_1 rows take the pure-Go twins there. The tests compare the kernels with their twins under
//     qemu-aarch64 (.ci/run).
//   - amd64 without AVX2 and FMA, other architectures, and any build with
//     the tag kvlease_generic: the pure-Go twins only, about a hundred
//     times slower than the vector kernels.
//
// Parallelism (a Runner lent by the edge) splits only independent outputs:
// rows of a matrix product, (position, head) pairs of attention. So a
// disaggregated prefill and decode produce exactly the tokens of a single
// engine. Softmax and SiLU use exp32 (exp.go: float32 operations with
// vector kernels of the same bits), the same on every platform; RoPE's
// angles come from package math (sin, cos): identical on one platform;
// engines on different CPU architectures may differ in the last bit.
//
// # Sampling
//
// Greedy at temperature 0 (the smallest id among the largest logits);
// otherwise a softmax at the temperature with nucleus (top_p) truncation,
// drawn from a PRF of (seed, position): the engine's seeded sampling
// semantics over real logits. Stop strings, stop token ids and EOS are the
// engine's, as for model/synth.
//
// The executor is pure (no I/O, no goroutines, no clock) and not safe for
// concurrent use. Its step's Duration is 0: the work is done when Execute
// returns, so the driver's clock measures it.
package llama
