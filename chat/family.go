package chat

import "strings"

// Family is a chat template family kvlease renders without Jinja: the
// fallback for a model whose template the Jinja engine cannot compile
// (Detect recognises the common families by their markers). A model
// without a template, or with one of no known family, gets Plain.
type Family uint8

const (
	// Plain, documented: "role: content\n" per message, then
	// "assistant:" when a generation prompt is asked for.
	Plain Family = iota
	// ChatML: "<|im_start|>role\ncontent<|im_end|>\n" per message, then
	// "<|im_start|>assistant\n" (SmolLM, Qwen).
	ChatML
	// Zephyr: "<|role|>\ncontent</s>\n" per message, then
	// "<|assistant|>\n" (TinyLlama-Chat).
	Zephyr
	// Llama2: "[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s><s>[INST] …".
	Llama2
	// Llama3: "<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>"
	// per message, then the assistant header.
	Llama3
)

var familyNames = [...]string{"plain", "chatml", "zephyr", "llama2", "llama3"}

func (f Family) String() string {
	if int(f) < len(familyNames) {
		return familyNames[f]
	}
	return "unknown"
}

// Detect names the family of a Jinja chat template by its markers; Plain
// when it has none kvlease knows.
func Detect(jinja string) Family {
	switch {
	case strings.Contains(jinja, "<|im_start|>"):
		return ChatML
	case strings.Contains(jinja, "<|start_header_id|>"):
		return Llama3
	case strings.Contains(jinja, "[INST]"):
		return Llama2
	case strings.Contains(jinja, "<|user|>") || strings.Contains(jinja, "<|assistant|>"):
		return Zephyr
	}
	return Plain
}

// Render renders c in family f. eos is the model's end-of-sequence text
// (such as "</s>"), used by the families that close turns with it. The
// tools prompt goes first in the system message and an assistant's tool
// calls after its content (WithToolsPrompt, PlainContent). The output is
// text with the family's special markers spelt out; the tokenizer turns
// them into their tokens.
func (f Family) Render(c *Conversation, bos, eos string) string {
	msgs := WithToolsPrompt(c.Messages, c.ToolsPrompt)
	if hasToolCalls(msgs) {
		msgs = append([]Message(nil), msgs...)
		for i := range msgs {
			msgs[i].Content = PlainContent(&msgs[i])
		}
	}
	addGenerationPrompt := c.AddGenerationPrompt
	var b strings.Builder
	switch f {
	case ChatML:
		for _, m := range msgs {
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		}
		if addGenerationPrompt {
			b.WriteString("<|im_start|>assistant\n")
		}
	case Zephyr:
		for _, m := range msgs {
			b.WriteString("<|" + m.Role + "|>\n" + m.Content + eos + "\n")
		}
		if addGenerationPrompt {
			b.WriteString("<|assistant|>\n")
		}
	case Llama3:
		for _, m := range msgs {
			b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + strings.TrimSpace(m.Content) + "<|eot_id|>")
		}
		if addGenerationPrompt {
			b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
		}
	case Llama2:
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

func hasToolCalls(msgs []Message) bool {
	for i := range msgs {
		if msgs[i].ToolCalls != nil {
			return true
		}
	}
	return false
}

// FixedGenerationPrompt is what RenderFixed appends when
// add_generation_prompt is true.
const FixedGenerationPrompt = "<|assistant|>\n"

// RenderFixed renders a conversation with kvlease's fixed chat template,
// the one of the simulated model (whose tokenizer is package tokenizer's):
// for each message "<|" + role + "|>\n" + content + "\n", then
// FixedGenerationPrompt when c.AddGenerationPrompt. For example a system
// and a user message render as
//
//	<|system|>\nYou are terse.\n<|user|>\nHi\n<|assistant|>\n
//
// Names are not rendered; the tools prompt goes first in the system
// message and an assistant's tool calls after its content (WithToolsPrompt,
// PlainContent). The template adds no special tokens. The output is a pure
// function of c.
func RenderFixed(c *Conversation) string {
	n := len(FixedGenerationPrompt) + len(c.ToolsPrompt) + 16
	for i := range c.Messages {
		n += len(c.Messages[i].Role) + len(c.Messages[i].Content) + 5
	}
	return string(AppendFixed(make([]byte, 0, n), c))
}

// AppendFixed appends the rendering of RenderFixed to dst.
func AppendFixed(dst []byte, c *Conversation) []byte {
	msgs := WithToolsPrompt(c.Messages, c.ToolsPrompt)
	for i := range msgs {
		m := &msgs[i]
		dst = append(dst, "<|"...)
		dst = append(dst, m.Role...)
		dst = append(dst, "|>\n"...)
		if m.ToolCalls != nil {
			dst = append(dst, PlainContent(m)...)
		} else {
			dst = append(dst, m.Content...)
		}
		dst = append(dst, '\n')
	}
	if c.AddGenerationPrompt {
		dst = append(dst, FixedGenerationPrompt...)
	}
	return dst
}
