package openai

import (
	"math"
	"strconv"
)

// Logprobs are a choice's (or a chunk's) tokens with their
// log-probabilities, as the model gave them.
type Logprobs struct {
	Tokens []LogprobToken
	// Text returns the text of a token id (nil for a special token such
	// as EOS); the encoders do not keep what it returns.
	Text func(id int32) []byte
}

// LogprobToken is one token of a choice.
type LogprobToken struct {
	ID      int32
	Logprob float32
	// Offset is the token's byte offset in the choice's text (the
	// completions shape's text_offset).
	Offset int
	// Top are the most probable tokens at the token's position, most
	// probable first.
	Top []TokenLogprob
	// None writes null for the logprob and the top (the completions
	// shape): the first token of an echoed prompt, which nothing
	// precedes.
	None bool
}

// TokenLogprob is a token id and its log-probability.
type TokenLogprob struct {
	ID      int32
	Logprob float32
}

// MinLogprob is what a log-probability of −Inf (a token the model never
// produces) is written as, as vLLM does: JSON has no infinities.
const MinLogprob = -9999.0

func appendLogprob(dst []byte, v float32) []byte {
	f := float64(v)
	if math.IsNaN(f) || f < MinLogprob {
		f = MinLogprob
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 32)
}

// appendCompletion writes the completions shape: {"tokens", "token_logprobs",
// "top_logprobs" (per token an object of the top tokens' texts, the
// sampled token's included, as vLLM does), "text_offset"}.
func (l *Logprobs) appendCompletion(dst []byte) []byte {
	dst = append(dst, `{"tokens":[`...)
	for i := range l.Tokens {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, string(l.Text(l.Tokens[i].ID)))
	}
	dst = append(dst, `],"token_logprobs":[`...)
	for i := range l.Tokens {
		if i > 0 {
			dst = append(dst, ',')
		}
		if l.Tokens[i].None {
			dst = append(dst, "null"...)
		} else {
			dst = appendLogprob(dst, l.Tokens[i].Logprob)
		}
	}
	dst = append(dst, `],"top_logprobs":[`...)
	for i := range l.Tokens {
		t := &l.Tokens[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		if t.None {
			dst = append(dst, "null"...)
			continue
		}
		dst = append(dst, '{')
		sampled := false
		for j, a := range t.Top {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, string(l.Text(a.ID)))
			dst = append(dst, ':')
			dst = appendLogprob(dst, a.Logprob)
			sampled = sampled || a.ID == t.ID
		}
		if !sampled {
			if len(t.Top) > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, string(l.Text(t.ID)))
			dst = append(dst, ':')
			dst = appendLogprob(dst, t.Logprob)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"text_offset":[`...)
	for i := range l.Tokens {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendInt(dst, int64(l.Tokens[i].Offset))
	}
	return append(dst, "]}"...)
}

// appendChat writes the chat shape: {"content": [{"token", "logprob",
// "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
func (l *Logprobs) appendChat(dst []byte) []byte {
	dst = append(dst, `{"content":[`...)
	for i := range l.Tokens {
		t := &l.Tokens[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = l.appendChatToken(dst, t.ID, t.Logprob)
		dst = dst[:len(dst)-1] // reopen the object for top_logprobs
		dst = append(dst, `,"top_logprobs":[`...)
		for j, a := range t.Top {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = l.appendChatToken(dst, a.ID, a.Logprob)
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}"...)
}

func (l *Logprobs) appendChatToken(dst []byte, id int32, lp float32) []byte {
	text := l.Text(id)
	dst = append(dst, `{"token":`...)
	dst = appendString(dst, string(text))
	dst = append(dst, `,"logprob":`...)
	dst = appendLogprob(dst, lp)
	dst = append(dst, `,"bytes":[`...)
	for k, b := range text {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendInt(dst, int64(b))
	}
	return append(dst, "]}"...)
}

// PromptLogprobs are vLLM's prompt_logprobs: for each prompt token, null
// for the first (nothing precedes it), else an object from token ids to
// {"logprob", "rank", "decoded_token"} holding the prompt token and the
// most probable tokens at its position.
type PromptLogprobs struct {
	// Tokens are the prompt's tokens after the first; Offset is unused.
	Tokens []LogprobToken
	// Ranks are the tokens' ranks (1 + the number of more probable
	// tokens), one per entry of Tokens.
	Ranks []int32
	Text  func(id int32) []byte
}

func (p *PromptLogprobs) appendJSON(dst []byte) []byte {
	dst = append(dst, "[null"...)
	for i := range p.Tokens {
		t := &p.Tokens[i]
		dst = append(dst, ",{"...)
		dst = p.appendEntry(dst, t.ID, t.Logprob, p.Ranks[i])
		for j, a := range t.Top {
			if a.ID == t.ID {
				continue
			}
			dst = append(dst, ',')
			dst = p.appendEntry(dst, a.ID, a.Logprob, int32(j+1))
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func (p *PromptLogprobs) appendEntry(dst []byte, id int32, lp float32, rank int32) []byte {
	dst = append(dst, '"')
	dst = appendInt(dst, int64(id))
	dst = append(dst, `":{"logprob":`...)
	dst = appendLogprob(dst, lp)
	dst = append(dst, `,"rank":`...)
	dst = appendInt(dst, int64(rank))
	dst = append(dst, `,"decoded_token":`...)
	dst = appendString(dst, string(p.Text(id)))
	return append(dst, '}')
}
