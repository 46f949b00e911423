// Package tokenizer is kvlease's tokenizer: byte-level, deterministic and
// identical for every model profile, so token counts, prefix hashes and
// simulated outputs agree across engines without any vocabulary files.
//
// # Vocabulary
//
// Token ids 0..255 are the bytes of the UTF-8 encoded text: Encode maps byte
// b to token int32(b). One special token follows: EOS = 256, written
// "<|endoftext|>". VocabSize is 257. Decode concatenates the bytes of the
// byte tokens and drops everything else (EOS and any id outside the
// vocabulary), like vLLM's skip_special_tokens=True. Decode(Encode(s)) == s
// for every string s, including strings that are not valid UTF-8; a token
// sequence chosen by a model may decode to invalid UTF-8, which the JSON
// encoders of package openai turn into U+FFFD, one per bad byte.
//
// # Streaming detokenization
//
// Stream turns generated tokens into text deltas for streaming responses and
// applies stop strings the way vLLM does:
//
//   - a delta never ends inside a UTF-8 sequence that may still complete:
//     trailing bytes of an incomplete sequence are held back until the
//     sequence completes or turns out to be invalid;
//   - text that could be the beginning of a stop string is held back until it
//     either completes the stop string or cannot any more;
//   - when a stop string matches, Add reports stopped and the text before the
//     stop string is the final delta; the stop string itself is included only
//     when the stream was created with includeStop (vLLM's
//     include_stop_str_in_output), in which case nothing is held back for
//     stop strings at all, since the emitted text is a prefix of the output
//     either way.
//
// The concatenation of all deltas and the final Flush equals Decode of the
// tokens, truncated at the stop point. Stop matching is on bytes, which for
// valid UTF-8 stop strings is the same as matching on characters. When
// several stop strings end at the same byte, the first in the list given to
// NewStream wins (vLLM checks them in order). Stop token ids and EOS are the
// engine's business, not the Stream's: Add ignores special tokens.
//
// Each Add costs O(number of stop strings), amortized (a KMP automaton per
// stop string), and the held-back text is bounded by the longest stop string
// plus three bytes.
//
// A Stream is not safe for concurrent use.
package tokenizer
