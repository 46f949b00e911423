package openai

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Object names and id prefixes of responses.
const (
	ObjectTextCompletion      = "text_completion"
	ObjectChatCompletion      = "chat.completion"
	ObjectChatCompletionChunk = "chat.completion.chunk"
	ObjectList                = "list"
	ObjectModel               = "model"

	// CompletionIDPrefix and ChatCompletionIDPrefix start response ids:
	// "cmpl-" + request id, "chatcmpl-" + request id.
	CompletionIDPrefix     = "cmpl-"
	ChatCompletionIDPrefix = "chatcmpl-"

	// OwnedBy is the owned_by of every model card.
	OwnedBy = "kvlease"
)

// FinishReason is a choice's finish_reason; "" is null (not finished).
type FinishReason string

// Finish reasons, as vLLM reports them.
const (
	FinishNone      FinishReason = ""
	FinishStop      FinishReason = "stop"       // EOS, a stop string or a stop token
	FinishLength    FinishReason = "length"     // max_tokens or the context limit
	FinishToolCalls FinishReason = "tool_calls" // the answer is complete tool calls
	FinishAbort     FinishReason = "abort"
	FinishError     FinishReason = "error"
)

// MarshalJSON writes null for FinishNone.
func (f FinishReason) MarshalJSON() ([]byte, error) { return appendStringOrNull(nil, string(f)), nil }

// StopReason is vLLM's stop_reason: null when generation ended otherwise
// (EOS, length), the stop string that matched, or the stop token id that
// matched. The zero value is null.
type StopReason struct {
	kind  uint8 // 0 null, 1 text, 2 token
	text  string
	token int32
}

// StopString returns the stop_reason for a matched stop string.
func StopString(s string) StopReason { return StopReason{kind: 1, text: s} }

// StopToken returns the stop_reason for a matched stop token id.
func StopToken(id int32) StopReason { return StopReason{kind: 2, token: id} }

// IsNull reports whether r is null.
func (r StopReason) IsNull() bool { return r.kind == 0 }

// Text returns the matched stop string, if r is one.
func (r StopReason) Text() (string, bool) { return r.text, r.kind == 1 }

// Token returns the matched stop token id, if r is one.
func (r StopReason) Token() (int32, bool) { return r.token, r.kind == 2 }

func (r StopReason) appendJSON(dst []byte) []byte {
	switch r.kind {
	case 1:
		return appendString(dst, r.text)
	case 2:
		return appendInt(dst, int64(r.token))
	}
	return append(dst, "null"...)
}

// MarshalJSON writes null, a string or an integer.
func (r StopReason) MarshalJSON() ([]byte, error) { return r.appendJSON(nil), nil }

// UnmarshalJSON reads null, a string or an integer.
func (r *StopReason) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case string(data) == "null":
		*r = StopReason{}
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*r = StopString(s)
	default:
		n, err := strconv.ParseInt(string(data), 10, 32)
		if err != nil {
			return BadRequest("stop_reason", "stop_reason must be null, a string or an integer")
		}
		*r = StopToken(int32(n))
	}
	return nil
}

// Usage is a response's token accounting.
type Usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails PromptTokensDetails `json:"prompt_tokens_details"`
}

// PromptTokensDetails says how many prompt tokens came from a cache (the
// local prefix cache or a remote prefill's KV).
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// NewUsage returns the usage of a request; TotalTokens is the sum.
func NewUsage(promptTokens, completionTokens, cachedTokens int) Usage {
	return Usage{PromptTokens: promptTokens, CompletionTokens: completionTokens,
		TotalTokens:         promptTokens + completionTokens,
		PromptTokensDetails: PromptTokensDetails{CachedTokens: cachedTokens}}
}

func (u *Usage) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = appendInt(dst, int64(u.PromptTokens))
	dst = append(dst, `,"completion_tokens":`...)
	dst = appendInt(dst, int64(u.CompletionTokens))
	dst = append(dst, `,"total_tokens":`...)
	dst = appendInt(dst, int64(u.TotalTokens))
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = appendInt(dst, int64(u.PromptTokensDetails.CachedTokens))
	return append(dst, "}}"...)
}

// CompletionResponse is a /v1/completions response. It is also the shape of
// a client's decode. The Append encoders write the right Object whatever
// the field holds, and always write logprobs as null.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"` // Unix seconds
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   Usage              `json:"usage"`
	// KVTransferParams is set on a prefill engine's response for a
	// do_remote_decode request; omitted when nil.
	KVTransferParams *KVTransferParams `json:"kv_transfer_params,omitempty"`
}

// CompletionChoice is a choice of a completion response or chunk.
type CompletionChoice struct {
	Index        int             `json:"index"`
	Text         string          `json:"text"`
	Logprobs     json.RawMessage `json:"logprobs"` // as decoded; the encoders write TokenLogprobs
	FinishReason FinishReason    `json:"finish_reason"`
	StopReason   StopReason      `json:"stop_reason"`
	// TokenLogprobs are written as logprobs in the completions shape;
	// nil writes null.
	TokenLogprobs *Logprobs `json:"-"`
	// PromptLogprobs, when set, are written as vLLM's prompt_logprobs
	// (omitted when nil).
	PromptLogprobs *PromptLogprobs `json:"-"`
	// TokenIDs (the choice's, or a chunk's new, generated token ids) and
	// PromptTokenIDs are vLLM's return_token_ids fields, omitted when nil.
	TokenIDs       []int32 `json:"token_ids,omitempty"`
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
}

// ChatCompletionResponse is a /v1/chat/completions response.
type ChatCompletionResponse struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Created          int64             `json:"created"`
	Model            string            `json:"model"`
	Choices          []ChatChoice      `json:"choices"`
	Usage            Usage             `json:"usage"`
	KVTransferParams *KVTransferParams `json:"kv_transfer_params,omitempty"`
	// PromptLogprobs, when set, are written as vLLM's response-level
	// prompt_logprobs (omitted when nil).
	PromptLogprobs *PromptLogprobs `json:"-"`
	// PromptTokenIDs is vLLM's return_token_ids field, omitted when nil.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
}

// ChatChoice is a choice of a chat response.
type ChatChoice struct {
	Index        int                 `json:"index"`
	Message      ChatResponseMessage `json:"message"`
	Logprobs     json.RawMessage     `json:"logprobs"` // as decoded; the encoders write TokenLogprobs
	FinishReason FinishReason        `json:"finish_reason"`
	StopReason   StopReason          `json:"stop_reason"`
	// TokenLogprobs are written as logprobs in the chat shape; nil
	// writes null.
	TokenLogprobs *Logprobs `json:"-"`
	// TokenIDs is vLLM's return_token_ids field, omitted when nil.
	TokenIDs []int32 `json:"token_ids,omitempty"`
}

// ChatResponseMessage is the generated message: role "assistant".
// With ToolCalls, content is null and the calls are the answer.
type ChatResponseMessage struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ToolCall is a function call of a chat answer (OpenAI's tool_calls,
// type "function"). In a stream's deltas, a call's first fragment has its
// Index, ID and Name, the later ones its Index and more Arguments.
type ToolCall struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// CompletionChunk is a streamed /v1/completions event. Usage is set on
// every chunk under continuous_usage_stats, and alone (no choices) on the
// final usage chunk; it is omitted when nil.
type CompletionChunk struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// ChatChunk is a streamed /v1/chat/completions event.
type ChatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []ChatChunkChoice `json:"choices"`
	Usage   *Usage            `json:"usage,omitempty"`
	// PromptTokenIDs (return_token_ids) go with a choice's first chunk;
	// omitted when nil.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
}

// ChatChunkChoice is a choice of a chat chunk.
type ChatChunkChoice struct {
	Index        int             `json:"index"`
	Delta        ChatDelta       `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"` // as decoded; the encoders write TokenLogprobs
	FinishReason FinishReason    `json:"finish_reason"`
	StopReason   StopReason      `json:"stop_reason"`
	// TokenLogprobs are the chunk's tokens' logprobs (chat shape).
	TokenLogprobs *Logprobs `json:"-"`
	// TokenIDs are the chunk's new token ids (return_token_ids), omitted
	// when nil.
	TokenIDs []int32 `json:"token_ids,omitempty"`
}

// ChatDelta is the new text of a chat chunk. Role is "assistant" on the
// first chunk of a choice and empty (omitted) after it.
// With ToolCalls, content is null.
type ChatDelta struct {
	Role      string     `json:"role,omitempty"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ModelList is the GET /v1/models response.
type ModelList struct {
	Object string      `json:"object"`
	Data   []ModelCard `json:"data"`
}

// ModelCard describes a served model: the base model, or a LoRA adapter
// on it (vLLM's cards: an adapter's Root is its path and its Parent the
// base model's name; the base model's Parent is null).
type ModelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Root        string `json:"root"`
	Parent      string `json:"parent"`
	MaxModelLen int    `json:"max_model_len"`
}

// appendHead appends `{"id":…,"object":…,"created":…,"model":…`.
func appendHead(dst []byte, id, object string, created int64, model string) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, id)
	dst = append(dst, `,"object":"`...)
	dst = append(dst, object...) // a constant: no escaping needed
	dst = append(dst, `","created":`...)
	dst = appendInt(dst, created)
	dst = append(dst, `,"model":`...)
	return appendString(dst, model)
}

// appendEnd appends `"logprobs":…,"finish_reason":…,"stop_reason":…}`,
// the logprobs in the chat shape or the completions shape.
func appendEnd(dst []byte, lp *Logprobs, chat bool, f FinishReason, s StopReason) []byte {
	dst = append(dst, `,"logprobs":`...)
	switch {
	case lp == nil:
		dst = append(dst, "null"...)
	case chat:
		dst = lp.appendChat(dst)
	default:
		dst = lp.appendCompletion(dst)
	}
	dst = append(dst, `,"finish_reason":`...)
	dst = appendStringOrNull(dst, string(f))
	dst = append(dst, `,"stop_reason":`...)
	dst = s.appendJSON(dst)
	return append(dst, '}')
}

func appendCompletionChoices(dst []byte, cs []CompletionChoice) []byte {
	dst = append(dst, `,"choices":[`...)
	for i := range cs {
		c := &cs[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"index":`...)
		dst = appendInt(dst, int64(c.Index))
		dst = append(dst, `,"text":`...)
		dst = appendString(dst, c.Text)
		dst = appendEnd(dst, c.TokenLogprobs, false, c.FinishReason, c.StopReason)
		if c.PromptLogprobs != nil {
			dst = append(dst[:len(dst)-1], `,"prompt_logprobs":`...) // reopen the choice
			dst = c.PromptLogprobs.appendJSON(dst)
			dst = append(dst, '}')
		}
		dst = reopenIDs(dst, `,"token_ids":`, c.TokenIDs)
		dst = reopenIDs(dst, `,"prompt_token_ids":`, c.PromptTokenIDs)
	}
	return append(dst, ']')
}

// reopenIDs adds member key (`,"name":`) with ids to the object dst ends
// with; nil ids add nothing.
func reopenIDs(dst []byte, key string, ids []int32) []byte {
	if ids == nil {
		return dst
	}
	dst = append(dst[:len(dst)-1], key...)
	dst = appendIDs(dst, ids)
	return append(dst, '}')
}

func appendIDs(dst []byte, ids []int32) []byte {
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendInt(dst, int64(id))
	}
	return append(dst, ']')
}

func appendTail(dst []byte, u *Usage, kv *KVTransferParams) []byte {
	if u != nil {
		dst = append(dst, `,"usage":`...)
		dst = u.appendJSON(dst)
	}
	if kv != nil {
		dst = append(dst, `,"kv_transfer_params":`...)
		dst = kv.AppendJSON(dst)
	}
	return append(dst, '}')
}

// AppendCompletionResponse appends r as JSON (object "text_completion").
// It allocates nothing beyond growing dst and retains nothing.
func AppendCompletionResponse(dst []byte, r *CompletionResponse) []byte {
	dst = appendHead(dst, r.ID, ObjectTextCompletion, r.Created, r.Model)
	dst = appendCompletionChoices(dst, r.Choices)
	return appendTail(dst, &r.Usage, r.KVTransferParams)
}

// AppendChatResponse appends r as JSON (object "chat.completion"). The
// message role is written as "assistant" when empty.
func AppendChatResponse(dst []byte, r *ChatCompletionResponse) []byte {
	dst = appendHead(dst, r.ID, ObjectChatCompletion, r.Created, r.Model)
	dst = append(dst, `,"choices":[`...)
	for i := range r.Choices {
		c := &r.Choices[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"index":`...)
		dst = appendInt(dst, int64(c.Index))
		dst = append(dst, `,"message":{"role":`...)
		role := c.Message.Role
		if role == "" {
			role = "assistant"
		}
		dst = appendString(dst, role)
		dst = append(dst, `,"content":`...)
		dst = appendContent(dst, c.Message.Content, c.Message.ToolCalls, false)
		dst = append(dst, '}')
		dst = appendEnd(dst, c.TokenLogprobs, true, c.FinishReason, c.StopReason)
		dst = reopenIDs(dst, `,"token_ids":`, c.TokenIDs)
	}
	dst = append(dst, ']')
	if r.PromptTokenIDs != nil {
		dst = append(dst, `,"prompt_token_ids":`...)
		dst = appendIDs(dst, r.PromptTokenIDs)
	}
	if r.PromptLogprobs != nil {
		dst = append(dst, `,"prompt_logprobs":`...)
		dst = r.PromptLogprobs.appendJSON(dst)
	}
	return appendTail(dst, &r.Usage, r.KVTransferParams)
}

// AppendCompletionChunk appends c as JSON (object "text_completion").
func AppendCompletionChunk(dst []byte, c *CompletionChunk) []byte {
	dst = appendHead(dst, c.ID, ObjectTextCompletion, c.Created, c.Model)
	dst = appendCompletionChoices(dst, c.Choices)
	return appendTail(dst, c.Usage, nil)
}

// AppendChatChunk appends c as JSON (object "chat.completion.chunk").
func AppendChatChunk(dst []byte, c *ChatChunk) []byte {
	dst = appendHead(dst, c.ID, ObjectChatCompletionChunk, c.Created, c.Model)
	dst = append(dst, `,"choices":[`...)
	for i := range c.Choices {
		ch := &c.Choices[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"index":`...)
		dst = appendInt(dst, int64(ch.Index))
		dst = append(dst, `,"delta":{`...)
		if ch.Delta.Role != "" {
			dst = append(dst, `"role":`...)
			dst = appendString(dst, ch.Delta.Role)
			dst = append(dst, ',')
		}
		dst = append(dst, `"content":`...)
		dst = appendContent(dst, ch.Delta.Content, ch.Delta.ToolCalls, true)
		dst = append(dst, '}')
		dst = appendEnd(dst, ch.TokenLogprobs, true, ch.FinishReason, ch.StopReason)
		dst = reopenIDs(dst, `,"token_ids":`, ch.TokenIDs)
	}
	dst = append(dst, ']')
	if c.PromptTokenIDs != nil {
		dst = append(dst, `,"prompt_token_ids":`...)
		dst = appendIDs(dst, c.PromptTokenIDs)
	}
	return appendTail(dst, c.Usage, nil)
}

// AppendUsageChunk appends the final usage chunk of a stream that asked for
// stream_options.include_usage: no choices, only usage. object is
// ObjectTextCompletion or ObjectChatCompletionChunk; anything else is a
// bug and panics.
func AppendUsageChunk(dst []byte, object, id string, created int64, model string, u *Usage) []byte {
	if object != ObjectTextCompletion && object != ObjectChatCompletionChunk {
		panic("openai: AppendUsageChunk: bad object " + strconv.Quote(object))
	}
	dst = appendHead(dst, id, object, created, model)
	dst = append(dst, `,"choices":[]`...)
	return appendTail(dst, u, nil)
}

// AppendModelList appends the GET /v1/models body for models. Each card's
// object is written as "model", an empty OwnedBy as "kvlease", an empty
// Root as the card's ID, an empty Parent and a zero MaxModelLen as null.
func AppendModelList(dst []byte, models []ModelCard) []byte {
	dst = append(dst, `{"object":"list","data":[`...)
	for i := range models {
		m := &models[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = appendString(dst, m.ID)
		dst = append(dst, `,"object":"model","created":`...)
		dst = appendInt(dst, m.Created)
		dst = append(dst, `,"owned_by":`...)
		owner := m.OwnedBy
		if owner == "" {
			owner = OwnedBy
		}
		dst = appendString(dst, owner)
		dst = append(dst, `,"root":`...)
		root := m.Root
		if root == "" {
			root = m.ID
		}
		dst = appendString(dst, root)
		dst = append(dst, `,"parent":`...)
		if m.Parent == "" {
			dst = append(dst, "null"...)
		} else {
			dst = appendString(dst, m.Parent)
		}
		dst = append(dst, `,"max_model_len":`...)
		if m.MaxModelLen == 0 {
			dst = append(dst, "null"...)
		} else {
			dst = appendInt(dst, int64(m.MaxModelLen))
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}

// SSEDone ends an event stream, as OpenAI's API does.
const SSEDone = "data: [DONE]\n\n"

// AppendSSE appends data as one server-sent event: "data: " + data +
// "\n\n". The encoders of this package never write a raw line break; should
// data contain one anyway (CR, LF or CRLF), each line gets its own "data: "
// prefix so the event stays well formed and decodes to the same data.
func AppendSSE(dst, data []byte) []byte {
	dst = append(dst, "data: "...)
	start := 0
	for i := 0; i < len(data); i++ {
		if c := data[i]; c == '\n' || c == '\r' {
			dst = append(dst, data[start:i]...)
			dst = append(dst, "\ndata: "...)
			if c == '\r' && i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	dst = append(dst, data[start:]...)
	return append(dst, '\n', '\n')
}

// appendContent appends a message's content, or null and its tool_calls
// when it has calls. In a delta, a call's id, type and name come only
// with its first fragment (when ID is set).
func appendContent(dst []byte, content string, calls []ToolCall, delta bool) []byte {
	if len(calls) == 0 {
		return appendString(dst, content)
	}
	dst = append(dst, `null,"tool_calls":[`...)
	for i := range calls {
		tc := &calls[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if delta {
			dst = append(dst, `"index":`...)
			dst = appendInt(dst, int64(tc.Index))
			dst = append(dst, ',')
		}
		if !delta || tc.ID != "" {
			dst = append(dst, `"id":`...)
			dst = appendString(dst, tc.ID)
			dst = append(dst, `,"type":"function","function":{"name":`...)
			dst = appendString(dst, tc.Name)
			dst = append(dst, ',')
		} else {
			dst = append(dst, `"function":{`...)
		}
		dst = append(dst, `"arguments":`...)
		dst = appendString(dst, tc.Arguments)
		dst = append(dst, "}}"...)
	}
	return append(dst, ']')
}
