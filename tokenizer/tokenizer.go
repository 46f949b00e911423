package tokenizer

// Special tokens and vocabulary size. See the package documentation.
const (
	// EOS ends a sequence.
	EOS int32 = 256
	// EOSText is how EOS is written in text.
	EOSText = "<|endoftext|>"
	// VocabSize is the number of token ids: 0..VocabSize-1 are valid.
	VocabSize = 257
)

// IsByte reports whether tok stands for a byte of text (0..255).
func IsByte(tok int32) bool { return uint32(tok) < 256 }

// Encode returns the tokens of text, one per byte. The returned slice is
// newly allocated and owned by the caller.
func Encode(text string) []int32 {
	return AppendEncode(make([]int32, 0, len(text)), text)
}

// AppendEncode appends the tokens of text to dst and returns the extended
// slice.
func AppendEncode(dst []int32, text string) []int32 {
	for i := 0; i < len(text); i++ {
		dst = append(dst, int32(text[i]))
	}
	return dst
}

// Decode returns the text of tokens. Special tokens and ids outside the
// vocabulary are dropped. The result may be invalid UTF-8 if the byte tokens
// do not form valid sequences.
func Decode(tokens []int32) string {
	return string(AppendDecode(make([]byte, 0, len(tokens)), tokens))
}

// AppendDecode appends the text of tokens to dst and returns the extended
// slice. See Decode.
func AppendDecode(dst []byte, tokens []int32) []byte {
	for _, t := range tokens {
		if IsByte(t) {
			dst = append(dst, byte(t))
		}
	}
	return dst
}

// Options say how a text prompt becomes tokens, for every tokenizer of the
// module (this one, and the model files' in model/llamafile). The zero
// value is vLLM's default.
type Options struct {
	// NoAddSpecialTokens: the prompt does not get the special tokens the
	// model's tokenizer adds (BOS): vLLM's add_special_tokens false.
	NoAddSpecialTokens bool
	// SplitSpecialTokens: special-token text written in the prompt stays
	// text instead of becoming the special token (Hugging Face
	// tokenizers' split_special_tokens; vLLM has no request field for it
	// and always parses special-token text).
	SplitSpecialTokens bool
}
