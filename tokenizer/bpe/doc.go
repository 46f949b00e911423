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
// Byte-level BPE: the text is split into words by the vocabulary's
// pre-tokenizer (Pre: GPT-2's pattern, Llama 3's, Qwen2's, …, each the
// Hugging Face tokenizers pattern written out by hand and checked against
// a backtracking regular-expression engine running the pattern itself),
// each word's bytes map to GPT-2's printable characters, and pairs merge
// by the lowest rank in the merges list (with IgnoreMerges, a word that is
// a token of its own is that token).
//
// Special tokens: the text of control, user-defined and unknown tokens
// written in a prompt becomes those tokens when Encode is asked to parse
// special tokens (user-defined ones always), leftmost and longest first,
// as Hugging Face tokenizers and vLLM do; see Encode.
//
// Both merge loops are O(n log n) in the text's length (a heap of candidate
// pairs over a linked list of symbols). The package is pure; a Tokenizer is
// immutable and safe for concurrent use.
package bpe
