package openai

// Chat template markers. See the package documentation.
const (
	// GenerationPrompt is appended when add_generation_prompt is true.
	GenerationPrompt = "<|assistant|>\n"
)

// RenderChatPrompt renders messages with kvlease's chat template: for each
// message "<|" + role + "|>\n" + content + "\n", then GenerationPrompt when
// addGenerationPrompt. Names are not rendered. The output is a pure function
// of its arguments.
func RenderChatPrompt(msgs []ChatMessage, addGenerationPrompt bool) string {
	n := len(GenerationPrompt)
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + 5
	}
	return string(AppendChatPrompt(make([]byte, 0, n), msgs, addGenerationPrompt))
}

// AppendChatPrompt appends the rendering of RenderChatPrompt to dst.
func AppendChatPrompt(dst []byte, msgs []ChatMessage, addGenerationPrompt bool) []byte {
	for _, m := range msgs {
		dst = append(dst, "<|"...)
		dst = append(dst, m.Role...)
		dst = append(dst, "|>\n"...)
		dst = append(dst, m.Content...)
		dst = append(dst, '\n')
	}
	if addGenerationPrompt {
		dst = append(dst, GenerationPrompt...)
	}
	return dst
}
