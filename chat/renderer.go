package chat

import (
	"fmt"
	"time"
)

// Renderer is a model's chat formatting: its own Jinja template, or, when
// the engine cannot compile that template (or the model has none), the
// family its markers name (Family.Render).
type Renderer struct {
	// Template is the model's compiled template; nil when Family is used.
	Template *Template
	// Family renders when Template is nil.
	Family Family
	// Tokens are the template's bos_token and eos_token (the families use
	// them too).
	Tokens Tokens
	// Fallback says why Family renders instead of the model's template: ""
	// when Template is set.
	Fallback string
}

// NewRenderer compiles a model's chat template src (GGUF's
// tokenizer.chat_template; "" for none) and renders a one-message
// conversation with it. A template that does not compile, or fails on that
// conversation other than by its own raise_exception, leaves the family of
// its markers, with Fallback saying why: the loader logs it once.
func NewRenderer(src string, tok Tokens) *Renderer {
	r := &Renderer{Tokens: tok}
	if src == "" {
		r.Family, r.Fallback = Plain, "the model file has no chat template"
		return r
	}
	t, err := Parse(src)
	if err != nil {
		r.Family = Detect(src)
		r.Fallback = fmt.Sprintf("its chat template does not compile (%v); rendering the %s family instead", err, r.Family)
		return r
	}
	// A template that compiles may still call what the engine lacks; a
	// one-message conversation (which every chat template takes) shows it.
	probe := &Conversation{Messages: []Message{{Role: "user", Content: "Hello"}}, AddGenerationPrompt: true}
	if _, err := t.Render(probe, tok, time.Date(2024, time.July, 26, 0, 0, 0, 0, time.UTC)); err != nil {
		if _, raised := err.(*RaiseError); !raised {
			r.Family = Detect(src)
			r.Fallback = fmt.Sprintf("its chat template does not run (%v); rendering the %s family instead", err, r.Family)
			return r
		}
	}
	r.Template = t
	return r
}

// Render renders c at time now (the clock of a template's strftime_now):
// with c.Template when the request brings one (vLLM's chat_template), else
// with the model's template or family. Errors are the request's: an
// *InputError (including a chat_template that does not compile), a
// *RaiseError (the template refused the conversation), or the template
// failing at run time on it.
func (r *Renderer) Render(c *Conversation, now time.Time) (string, error) {
	t := r.Template
	if c.Template != "" {
		var err error
		if t, err = Parse(c.Template); err != nil {
			return "", &InputError{"chat_template", "chat_template does not compile: " + err.Error()}
		}
	}
	if t == nil {
		return r.Family.Render(c, r.Tokens.BOS, r.Tokens.EOS), nil
	}
	return t.Render(c, r.Tokens, now)
}
