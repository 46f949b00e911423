// Package bpe holds the tokenizers real model files carry: SentencePiece-
// style BPE with byte fallback (llama, llama 2, TinyLlama, llama2.c's
// tokenizer.bin) and GPT-2-style byte-level BPE with a merges list (SmolLM,
// GPT-2 and other GGUF "gpt2" tokenizers). A Vocab comes from a model file
// (package model/gguf or model/llama2c); New builds the Tokenizer.
//
// SentencePiece: spaces become the space marker ("▁"), one is prepended to
// the text (the dummy prefix), the text is split into characters, and the
// adjacent pair whose concatenation is the highest-scoring piece merges
// (the leftmost on ties) until no pair is a piece. A character that is not a
// piece becomes its UTF-8 bytes' <0xXX> tokens (or <unk>).
//
// Byte-level BPE: the text is split by GPT-2's pre-tokenizer pattern, each
// part's bytes map to GPT-2's printable characters, and pairs merge by the
// lowest rank in the merges list. Files whose pre-tokenizer differs (llama
// 3's, for example) are split with GPT-2's pattern anyway: the tokens may
// differ from the reference tokenizer's on digits and contractions, which is
// why prompts given as token ids go to the model verbatim.
//
// Both merge loops are O(n log n) in the text's length (a heap of candidate
// pairs over a linked list of symbols). The package is pure; a Tokenizer is
// immutable and safe for concurrent use.
package bpe
