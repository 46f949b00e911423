package constrain

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
