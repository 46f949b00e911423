package openai

import "github.com/kvlease/kvlease/chat"

// Chat template markers. See the package documentation.
const (
	// GenerationPrompt is appended when add_generation_prompt is true.
	GenerationPrompt = "<|assistant|>\n"
)

// RenderChatPrompt renders a conversation with kvlease's fixed chat
// template: for each message "<|" + role + "|>\n" + content + "\n", then
// GenerationPrompt when c.AddGenerationPrompt. Names are not rendered; the
// tools prompt goes first in the system message and an assistant's tool
// calls after its content (chat.WithToolsPrompt, chat.PlainContent). The
// output is a pure function of c.
func RenderChatPrompt(c *chat.Conversation) string {
	n := len(GenerationPrompt) + len(c.ToolsPrompt) + 16
	for i := range c.Messages {
		n += len(c.Messages[i].Role) + len(c.Messages[i].Content) + 5
	}
	return string(AppendChatPrompt(make([]byte, 0, n), c))
}

// AppendChatPrompt appends the rendering of RenderChatPrompt to dst.
func AppendChatPrompt(dst []byte, c *chat.Conversation) []byte {
	msgs := chat.WithToolsPrompt(c.Messages, c.ToolsPrompt)
	for i := range msgs {
		m := &msgs[i]
		dst = append(dst, "<|"...)
		dst = append(dst, m.Role...)
		dst = append(dst, "|>\n"...)
		if m.ToolCalls != nil {
			dst = append(dst, chat.PlainContent(m)...)
		} else {
			dst = append(dst, m.Content...)
		}
		dst = append(dst, '\n')
	}
	if c.AddGenerationPrompt {
		dst = append(dst, GenerationPrompt...)
	}
	return dst
}
