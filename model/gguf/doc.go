// Package gguf parses GGUF v3 files (llama.cpp's model format): the
// header, the typed metadata, the tensor infos and the aligned tensor data,
// from bytes the caller holds (typically a memory-mapped file); it does no
// I/O. Llama builds model/llama weights from a llama, qwen2 or qwen3 file
// (tensors of the types llama.Type.Loads: F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; whatever it does not implement
// refused by name) and Tokenizer its tokenizer from the
// tokenizer.ggml.* metadata. Every count and length in a file is bounded by
// the bytes that remain, so a corrupt file fails with ErrTruncated,
// ErrFormat or ErrUnsupported and never allocates without bound.
package gguf
