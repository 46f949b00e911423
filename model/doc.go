// Package model defines the Executor, the boundary between an engine core
// and whatever computes KV and samples tokens.
//
// An engine core returns a Batch from each step; the caller hands it to an
// Executor, which writes the KV of the batch's tokens into the pool's blocks
// and returns a StepResult with one sampled token per sequence that asked for
// one and the step's duration. The caller feeds the result back into the
// core at now + duration, or, for an executor that computes in real time
// (model/llama), runs Execute off the engine's loop and feeds the result
// back when it is done (engine.LoopConfig.Async): the loop keeps serving
// the transport meanwhile. docs/gpu-executor.md designs a GPU backend on
// the same contract. model/synth is the default backend: a latency model
// with deterministic KV content. model/llama is a real llama-architecture
// transformer on the CPU over the same pool slots (kvlease serve
// --model-file).
//
// A sequence's Mask (constrained decoding: model/constrain computes it in
// the engine core) restricts its draw to the tokens it allows; an
// executor must honour it whatever the sampling parameters.
package model
