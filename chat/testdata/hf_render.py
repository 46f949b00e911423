#!/usr/bin/env python3
"""Reference chat-template renderer for chat's tests.

Renders a Jinja chat template the way Hugging Face's apply_chat_template
does: jinja2's ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and the loopcontrols extension; the globals raise_exception
(raises a TemplateError with the template's message) and strftime_now
(strftime of the current time), and a tojson filter that is json.dumps
with ensure_ascii=False and json.dumps's indent, separators and sort_keys.
The current time is the request's "now" so both renderers see one clock.

Hugging Face's {% generation %} block (its AssistantTracker extension)
renders its body.

The variables are those vLLM passes to apply_chat_template for an OpenAI
chat request: messages with role and content (text parts joined with
"\n"), then tool_calls (an empty list dropped; each function's arguments
parsed from their JSON text with json.loads, {} when empty), tool_call_id
and name when given; tools as the request has them (None when absent);
add_generation_prompt; bos_token and eos_token; then chat_template_kwargs.

Reads a JSON array of jobs on stdin, each
  {"template": "...", "now": "2024-07-26T09:30:00", "bos_token": "<s>",
   "eos_token": "</s>", "cases": [{"messages": [...], "tools": [...],
   "add_generation_prompt": true, "chat_template_kwargs": {...}}, ...]}
with messages as an OpenAI chat request has them, and writes a JSON array
with each job's result: an array of one {"text": "..."} or {"error": "...",
"kind": "..."} per case, or {"compile_error": "..."} when the template does
not compile.
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox


class Generation(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: the body, as HF renders it."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def message(m):
    """An OpenAI message as vLLM gives it to the template."""
    content = m.get("content")
    if content is None:
        content = ""
    elif isinstance(content, list):
        content = "\n".join(p["text"] for p in content)
    out = {"role": m["role"], "content": content}
    calls = m.get("tool_calls")
    if calls:
        calls = json.loads(json.dumps(calls))
        for c in calls:
            args = c["function"].get("arguments")
            c["function"]["arguments"] = json.loads(args) if args else {}
        out["tool_calls"] = calls
    if m.get("tool_call_id"):
        out["tool_call_id"] = m["tool_call_id"]
    if m.get("name"):
        out["name"] = m["name"]
    return out


def context(req, case):
    ctx = {"messages": [message(m) for m in case["messages"]],
           "tools": case.get("tools"),
           "add_generation_prompt": case.get("add_generation_prompt", True)}
    for tok in ("bos_token", "eos_token"):
        if req.get(tok):
            ctx[tok] = req[tok]
    ctx.update(case.get("chat_template_kwargs") or {})
    return ctx


def main():
    json.dump([render_job(job) for job in json.load(sys.stdin)], sys.stdout, ensure_ascii=False)


def render_job(req):
    now = datetime.datetime.fromisoformat(req["now"])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return now.strftime(fmt)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        tmpl = env.from_string(req["template"])
    except jinja2.exceptions.TemplateError as e:
        return {"compile_error": str(e)}
    out = []
    for case in req["cases"]:
        try:
            out.append({"text": tmpl.render(**context(req, case))})
        except Exception as e:  # a template's raise_exception, or a runtime error
            out.append({"error": str(e), "kind": type(e).__name__})
    return out


if __name__ == "__main__":
    main()
