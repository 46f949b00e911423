package constrain

import (
	"bytes"
	"slices"
)

// Call is a tool call read back from the text of a ToolCalls grammar: the
// tool's name and its arguments' JSON text as generated (a prefix of it
// while the call is incomplete).
type Call struct {
	Name string
	Args []byte
}

// CallParser reads tool calls out of a generated text as it grows. Bytes
// the grammar refuses (there are none in a text generated under the same
// grammar) end the parse: what follows is ignored. Not safe for
// concurrent use.
type CallParser struct {
	g     *Grammar
	st    State
	calls []Call
	bad   bool
}

// NewCallParser starts reading a text of g, a ToolCalls grammar.
func NewCallParser(g *Grammar) *CallParser {
	return &CallParser{g: g, st: g.Start()}
}

// Write feeds the next bytes of the text.
func (p *CallParser) Write(b []byte) {
	for _, c := range b {
		if p.bad || p.st.mode == mFree {
			return
		}
		in := p.st.inArgs
		if !p.st.Feed(c) {
			p.bad = true
			return
		}
		switch {
		case in:
			last := &p.calls[len(p.calls)-1]
			last.Args = append(last.Args, c)
		case p.st.inArgs:
			p.calls = append(p.calls, Call{Name: p.g.CallName(p.st.Call())})
		}
	}
}

// Calls are the calls so far, the last possibly incomplete. The slice and
// the calls' Args are the parser's: read-only, valid until the next Write.
func (p *CallParser) Calls() []Call { return p.calls }

// Text reports whether the text is free text, not calls (an auto
// tool-choice answer whose first byte started no call).
func (p *CallParser) Text() bool { return p.st.mode == mFree }

// Tool is a function a model may call: its name and its parameters'
// compiled schema.
type Tool struct {
	Name   string
	Params *Grammar
}

// ToolCalls is the grammar of an answer that calls one of tools:
//
//	{"name":"<tool>","arguments":<the tool's parameters>}
//
// or, with parallel, that or a JSON array of one to MaxParallelCalls of
// them. With auto, the answer is calls (its first byte is '{', or '['
// with parallel) or free text (any other first byte): the model chooses
// with its first token. CallParser reads such an answer back.
func ToolCalls(tools []Tool, parallel, auto bool) *Grammar {
	lits := make([][]byte, len(tools))
	for i, t := range tools {
		lits[i] = callPrefix(t.Name)
	}
	alt := &node{kinds: kObject, alts: newLiterals(lits), suffix: newLiterals([][]byte{[]byte("}")}), maxItems: -1, maxLen: -1}
	alt.altNodes = make([]*node, len(alt.alts.s))
	names := make([]string, len(alt.alts.s))
	for _, t := range tools {
		p := callPrefix(t.Name)
		i, _ := slices.BinarySearchFunc(alt.alts.s, p, bytes.Compare)
		alt.altNodes[i], names[i] = t.Params.root, t.Name
	}
	root := alt
	if parallel {
		// One call, or an array of calls.
		both := *alt
		both.kinds, both.items, both.minItems, both.maxItems = kObject|kArray, alt, 1, MaxParallelCalls
		root = &both
	}
	return &Grammar{root: root, auto: auto, calls: names}
}

// IsObject reports whether every text of g is a JSON object (what a
// tool's parameters must be).
func (g *Grammar) IsObject() bool {
	return g.root.enum == nil && g.root.alts == nil && g.root.kinds == kObject
}

func callPrefix(name string) []byte {
	return []byte(`{"name":` + string(encodeString(name)) + `,"arguments":`)
}
