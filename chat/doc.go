// Package chat turns a chat conversation into the text a model reads: the
// model's own Jinja chat template (a GGUF file's tokenizer.chat_template),
// or a request's (vLLM's chat_template), rendered as Hugging Face's
// apply_chat_template renders it for vLLM; and, for a model whose template
// the engine cannot compile or run, the family its markers name (ChatML,
// Zephyr, Llama 2, Llama 3, else plain: Family).
//
// Templates are run by github.com/ardanlabs/jinja with what Hugging Face
// adds: raise_exception (a *RaiseError carrying the template's message,
// which the server answers with a 400 as vLLM does), strftime_now on the
// render's clock (an argument: the package reads no clock), and tojson as
// json.dumps(ensure_ascii=False) with its indent, separators, sort_keys
// and ensure_ascii arguments (pyjson.go). Whitespace control (trim_blocks,
// lstrip_blocks, "-" and "+") is applied by lex.go as Jinja2's lexer
// does. The variables are vLLM's: messages (tool call arguments parsed
// from their JSON text), tools, add_generation_prompt, bos_token,
// eos_token and chat_template_kwargs (Template.Render).
//
// The output is checked byte for byte against python3-jinja2 configured as
// Hugging Face configures it (testdata/hf_render.py): the real templates
// of llama.cpp's models/templates (TestTemplatesMatchReference, with
// KVLEASE_LLAMACPP) and a small committed one (TestSmallTemplate) on the
// conversations of testdata/conversations.json.
package chat
