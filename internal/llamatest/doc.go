// Package llamatest makes llama-architecture model files for tests and
// benchmarks: seeded random weights in real shapes (Random), quantized to
// F16 or Q8_0 (Quantize), written as llama2.c checkpoints with their
// tokenizer.bin (WriteLlama2C, WriteTokenizerBin) or as GGUF v3 files with
// their tokenizer in the metadata (WriteGGUF). No registry reachable from
// here ships trained weights, so every test of model/llama and its loaders
// runs on files written by this package. It does no I/O of its own: the
// writers take an io.Writer.
package llamatest
