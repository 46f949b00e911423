package openai

import "strings"

// ChatFormat is a chat template kvlease can render. Model files carry
// their template as Jinja source (GGUF's tokenizer.chat_template); kvlease
// does not run Jinja but recognises the common families by their markers
// (DetectChatFormat) and renders them itself. A model without a template,
// or with one of no known family, gets ChatPlain.
type ChatFormat uint8

const (
	// ChatPlain, documented: "role: content\n" per message, then
	// "assistant:" when a generation prompt is asked for.
	ChatPlain ChatFormat = iota
	// ChatML: "<|im_start|>role\ncontent<|im_end|>\n" per message, then
	// "<|im_start|>assistant\n" (SmolLM, Qwen).
	ChatML
	// ChatZephyr: "<|role|>\ncontent</s>\n" per message, then
	// "<|assistant|>\n" (TinyLlama-Chat).
	ChatZephyr
	// ChatLlama2: "[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] …".
	ChatLlama2
	// ChatLlama3: "<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>"
	// per message, then the assistant header.
	ChatLlama3
)

var chatFormatNames = [...]string{"plain", "chatml", "zephyr", "llama2", "llama3"}

func (f ChatFormat) String() string {
	if int(f) < len(chatFormatNames) {
		return chatFormatNames[f]
	}
	return "unknown"
}

// DetectChatFormat names the family of a Jinja chat template by its
// markers; ChatPlain when it has none kvlease knows.
func DetectChatFormat(jinja string) ChatFormat {
	switch {
	case strings.Contains(jinja, "<|im_start|>"):
		return ChatML
	case strings.Contains(jinja, "<|start_header_id|>"):
		return ChatLlama3
	case strings.Contains(jinja, "[INST]"):
		return ChatLlama2
	case strings.Contains(jinja, "<|user|>") || strings.Contains(jinja, "<|assistant|>"):
		return ChatZephyr
	}
	return ChatPlain
}

// Render renders msgs in format f. eos is the model's end-of-sequence text
// (such as "</s>"), used by the formats that close turns with it. The
// output is text with the format's special markers spelt out; the tokenizer
// turns them into their tokens.
func (f ChatFormat) Render(msgs []ChatMessage, addGenerationPrompt bool, bos, eos string) string {
	var b strings.Builder
	switch f {
	case ChatML:
		for _, m := range msgs {
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		}
		if addGenerationPrompt {
			b.WriteString("<|im_start|>assistant\n")
		}
	case ChatZephyr:
		for _, m := range msgs {
			b.WriteString("<|" + m.Role + "|>\n" + m.Content + eos + "\n")
		}
		if addGenerationPrompt {
			b.WriteString("<|assistant|>\n")
		}
	case ChatLlama3:
		for _, m := range msgs {
			b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + strings.TrimSpace(m.Content) + "<|eot_id|>")
		}
		if addGenerationPrompt {
			b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
		}
	case ChatLlama2:
		sys := ""
		open := false // an [INST] awaits its answer
		for _, m := range msgs {
			switch m.Role {
			case "system", "developer":
				sys += m.Content
			case "assistant":
				if open {
					b.WriteString(" " + strings.TrimSpace(m.Content) + " " + eos)
					open = false
				}
			default:
				if b.Len() > 0 {
					b.WriteString(bos)
				}
				b.WriteString("[INST] ")
				if sys != "" {
					b.WriteString("<<SYS>>\n" + sys + "\n<</SYS>>\n\n")
					sys = ""
				}
				b.WriteString(strings.TrimSpace(m.Content) + " [/INST]")
				open = true
			}
		}
	default:
		for _, m := range msgs {
			b.WriteString(m.Role + ": " + m.Content + "\n")
		}
		if addGenerationPrompt {
			b.WriteString("assistant:")
		}
	}
	return b.String()
}
