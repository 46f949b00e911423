// Package gguf parses GGUF v3 files (llama.cpp's model format): the
// header, the typed metadata, the tensor infos and the aligned tensor data,
// from bytes the caller holds (typically a memory-mapped file); it does no
// I/O. Llama builds model/llama weights from a llama, qwen2 or qwen3 file
// (F32, F16 and Q8_0 tensors; whatever it does not implement refused by
// name) and Tokenizer its tokenizer from the
// tokenizer.ggml.* metadata. Every count and length in a file is bounded by
// the bytes that remain, so a corrupt file fails with ErrTruncated,
// ErrFormat or ErrUnsupported and never allocates without bound.
package gguf
