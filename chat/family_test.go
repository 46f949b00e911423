package chat

import "testing"

func TestFamilys(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"}, {Role: "user", Content: "Bye"}}
	for _, tc := range []struct {
		jinja string
		f     Family
		want  string
	}{
		{"", Plain, "system: Be brief.\nuser: Hi\nassistant: Hello\nuser: Bye\nassistant:"},
		{"{{'<|im_start|>' + m.role}}", ChatML, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
		{"{{ '<|user|>\n' }}", Zephyr, "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello</s>\n<|user|>\nBye</s>\n<|assistant|>\n"},
		{"[INST] {{ m }}", Llama2, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Bye [/INST]"},
		{"<|start_header_id|>", Llama3, "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	} {
		f := Detect(tc.jinja)
		if f != tc.f {
			t.Errorf("Detect(%q) = %v, want %v", tc.jinja, f, tc.f)
		}
		if got := f.Render(&Conversation{Messages: msgs, AddGenerationPrompt: true}, "<s>", "</s>"); got != tc.want {
			t.Errorf("%v: %q\nwant %q", f, got, tc.want)
		}
	}
}

func TestRenderFixed(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "Hi", Name: "ignored"},
		{Role: "assistant", Content: "Hello."},
		{Role: "user", Content: "multi\nline"},
	}
	want := "<|system|>\nYou are terse.\n<|user|>\nHi\n<|assistant|>\nHello.\n<|user|>\nmulti\nline\n"
	if got := RenderFixed(&Conversation{Messages: msgs}); got != want {
		t.Errorf("without generation prompt:\n%q\nwant\n%q", got, want)
	}
	if got := RenderFixed(&Conversation{Messages: msgs, AddGenerationPrompt: true}); got != want+"<|assistant|>\n" {
		t.Errorf("with generation prompt: %q", got)
	}
	if got := RenderFixed(&Conversation{AddGenerationPrompt: true}); got != FixedGenerationPrompt {
		t.Errorf("empty: %q", got)
	}
	if got := string(AppendFixed([]byte("x"), &Conversation{Messages: msgs[:1]})); got != "x<|system|>\nYou are terse.\n" {
		t.Errorf("append: %q", got)
	}
}
