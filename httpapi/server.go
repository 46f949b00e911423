package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvlease/kvlease/chat"
	"github.com/kvlease/kvlease/clock"
	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/metrics"
	"github.com/kvlease/kvlease/node"
	"github.com/kvlease/kvlease/openai"
	"github.com/kvlease/kvlease/tokenizer"
)

// Engine is what the server needs of an engine. *node.Node implements
// it (and Rejecter); tests wrap a Node to observe calls.
//
// Everything a generation handler does to its request — abort it when the
// client leaves, stop it on a stop string, report whether the lease token
// was delivered — goes through the request's own engine.Stream
// (Stream.Abort, Stream.Stop, Stream.Delivered), never through the
// request's id: the id is the client's X-Request-Id, and once the request
// finished another client may be using it (S29).
type Engine interface {
	// Start submits req and returns its stream at once; the outcome of
	// the submission comes with the stream's first Recv (outputs, or
	// node.ErrRefused and Stream.Refusal). req stays unchanged until
	// then. See node.Node.Start.
	Start(req *engine.Request, opt node.SubmitOptions) *node.Stream
	// Abort aborts by id, for the abort endpoint only (see
	// node.Node.Abort).
	Abort(id string) engine.AbortResult
	Stats() engine.NodeStats
	Config() engine.Config
	Now() clock.Instant
	Draining() bool
	// TransferEndpoint is where decode engines pull this engine's leases
	// (false when it grants none or has no usable address).
	TransferEndpoint() (node.TransferEndpoint, bool)
}

// Rejecter is implemented by an Engine that can tell a prefill engine at
// once that a request carrying its lease was refused before admission
// (RELEASE rejected), whatever the engine's state, including while it
// drains. Without it the server makes the core send the notice by
// submitting a request the core refuses, which works except while draining.
type Rejecter interface {
	Reject(req *engine.Request)
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 8 << 20
	DefaultRetryAfter   = time.Second
	// MaxRequestIDBytes bounds X-Request-Id.
	MaxRequestIDBytes = 256
)

// Config configures a Server.
type Config struct {
	// ModelName is the one model served (required). A request may name
	// it or leave model empty.
	ModelName string
	// MaxBodyBytes bounds a request body; beyond it the answer is 413.
	// Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RetryAfter is the hint sent with a 429 when the engine's queue is
	// full. Zero means DefaultRetryAfter.
	RetryAfter time.Duration
	// Version is served at GET /version.
	Version string
	// Metrics is the registry served at /metrics and fed with request
	// latencies. Nil: the server makes one over the engine.
	Metrics *metrics.Metrics
	// Logger receives warnings and lifecycle logs, never one line per
	// request. Nil discards.
	Logger *slog.Logger
	// APIKeys, when enabled, are required as "Authorization: Bearer <key>"
	// on every path under /v1 and on the abort endpoint, as vLLM's
	// --api-key (OPTIONS excepted, as there); a request without one gets
	// 401 in OpenAI's error shape. /health, /version and /metrics stay
	// open for probes and scrapers. The zero value requires nothing.
	APIKeys openai.APIKeys
	// StreamInterval is the tokens per event of a stream with one choice,
	// as vLLM's --stream-interval: the first token's event at once, then
	// an event each time StreamInterval tokens have come, and the last at
	// the end; 1 (vLLM's default) is an event per token. 0: an event
	// carries whatever tokens are there when the handler gets to them
	// (fewest events; under load many tokens share one). Negative is
	// invalid.
	StreamInterval int
	// Tokenizer turns text prompts and chats into token ids and generated
	// tokens into text. Nil: kvlease's byte-level tokenizer and chat
	// template (package tokenizer, chat.AppendFixed), which go with
	// the simulated model.
	Tokenizer Tokenizer
	// Faults, when set, turns the fault-injection API on (faultapi.go):
	// FaultsPath, guarded by its admin key, and the X-Return-Error header.
	// Nil: FaultsPath answers 404 and the header is ignored.
	Faults *FaultConfig
	// KVPeers, on a decode engine, are the prefill endpoints it may dial;
	// nil: any that a request names.
	KVPeers *KVPeers
	// LoRA, when set, serves LoRA adapters (lora.go): requests name them
	// as their model, /v1/models lists them, vllm:lora_requests_info
	// reports them, and with RuntimeUpdates the load and unload endpoints
	// change them. The executor must apply kvblock.Adapter (the simulated
	// model does). Nil: adapters are unknown models.
	LoRA *LoRAConfig
}

// Tokenizer is the text side of the served model. Implementations must be
// safe for concurrent use.
type Tokenizer interface {
	// AppendEncode appends the tokens of a completion prompt to dst, as
	// the request's tokenization fields say.
	AppendEncode(dst []int32, text string, opt openai.Tokenization) []int32
	// AppendChat appends the tokens of a chat rendered with the model's
	// chat template (or the request's chat_template) to dst. An error is
	// the request's (a template that refuses the conversation, a
	// chat_template that does not compile): a 400 (chatError).
	AppendChat(dst []int32, c *chat.Conversation) ([]int32, error)
	// TokenBytes is the text of one generated token: nil for special
	// tokens. The caller does not keep or modify it.
	TokenBytes(tok int32) []byte
}

// byteTokenizer is kvlease's own tokenizer: one token per byte.
type byteTokenizer struct{}

// AppendEncode: one token per byte whatever opt says (the byte-level
// vocabulary has neither BOS nor special-token text).
func (byteTokenizer) AppendEncode(dst []int32, text string, _ openai.Tokenization) []int32 {
	return tokenizer.AppendEncode(dst, text)
}

// AppendChat renders c with kvlease's fixed template
// (chat.RenderFixed), or with the request's chat_template, and
// encodes the bytes.
func (byteTokenizer) AppendChat(dst []int32, c *chat.Conversation) ([]int32, error) {
	if c.Template != "" {
		text, err := (&chat.Renderer{}).Render(c, time.Now())
		if err != nil {
			return dst, err
		}
		return tokenizer.AppendEncode(dst, text), nil
	}
	if c.ToolsPrompt != "" || hasToolCalls(c.Messages) {
		return tokenizer.AppendEncode(dst, chat.RenderFixed(c)), nil
	}
	for i := range c.Messages {
		m := &c.Messages[i]
		dst = tokenizer.AppendEncode(dst, "<|")
		dst = tokenizer.AppendEncode(dst, m.Role)
		dst = tokenizer.AppendEncode(dst, "|>\n")
		dst = tokenizer.AppendEncode(dst, m.Content)
		dst = append(dst, '\n')
	}
	if c.AddGenerationPrompt {
		dst = tokenizer.AppendEncode(dst, chat.FixedGenerationPrompt)
	}
	return dst, nil
}

func hasToolCalls(msgs []openai.ChatMessage) bool {
	for i := range msgs {
		if msgs[i].ToolCalls != nil {
			return true
		}
	}
	return false
}

// chatError is the 400 for a chat the template cannot render: the
// template's own message when it raised, as vLLM answers.
func chatError(err error) *openai.Error {
	var ie *chat.InputError
	if errors.As(err, &ie) {
		return openai.BadRequest(ie.Param, "%s", ie.Msg)
	}
	var re *chat.RaiseError
	if errors.As(err, &re) {
		return openai.BadRequest("messages", "%s", re.Message)
	}
	return openai.BadRequest("messages", "the chat template failed on these messages: %v", err)
}

var byteText = func() (t [256][1]byte) {
	for i := range t {
		t[i][0] = byte(i)
	}
	return t
}()

func (byteTokenizer) TokenBytes(tok int32) []byte {
	if !tokenizer.IsByte(tok) {
		return nil
	}
	return byteText[tok][:]
}

// Server is the OpenAI-compatible HTTP API of one engine. It is an
// http.Handler, safe for concurrent use. See the package documentation for
// the endpoints and their answers.
type Server struct {
	eng     Engine
	cfg     Config
	ecfg    engine.Config
	log     *slog.Logger
	metrics *metrics.Metrics
	promH   http.Handler

	// producer and consumer say which P/D sides the engine has; endpoint
	// is the producer's transfer endpoint, if it has one.
	producer, consumer bool
	endpoint           node.TransferEndpoint
	hasEndpoint        bool

	idPrefix string
	nextID   atomic.Uint64
	created  int64

	modelsBody  []byte
	versionBody []byte

	calls sync.Pool // *call

	faults *faultState // nil: the fault API is off
	loras  *loraSet    // nil: no LoRA adapters
}

// New returns a server over eng. It reports a configuration error.
func New(eng Engine, cfg Config) (*Server, error) {
	if cfg.ModelName == "" {
		return nil, errors.New("httpapi: Config.ModelName is required")
	}
	if cfg.StreamInterval < 0 {
		return nil, fmt.Errorf("httpapi: Config.StreamInterval %d: want 0 or more", cfg.StreamInterval)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = DefaultRetryAfter
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Tokenizer == nil {
		cfg.Tokenizer = byteTokenizer{}
	}
	s := &Server{eng: eng, cfg: cfg, ecfg: eng.Config(), log: cfg.Logger, metrics: cfg.Metrics}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.metrics == nil {
		s.metrics = metrics.New(cfg.ModelName, eng)
	}
	s.promH = s.metrics.Handler()
	if cfg.Faults != nil {
		if err := s.initFaults(cfg.Faults); err != nil {
			return nil, err
		}
	}
	if cfg.LoRA != nil {
		var err error
		if s.loras, err = newLoRASet(*cfg.LoRA, cfg.ModelName); err != nil {
			return nil, err
		}
		s.metrics.RegisterLoRA(eng, s.loras.cfg.MaxLoRAs)
	}
	if s.ecfg.Transfer != nil {
		s.producer = s.ecfg.Role != engine.RoleDecode
		s.consumer = s.ecfg.Role != engine.RolePrefill
	}
	if s.producer {
		s.endpoint, s.hasEndpoint = eng.TransferEndpoint()
		if !s.hasEndpoint {
			s.log.Warn("this engine grants leases but has no transfer endpoint to advertise: prefill answers will carry no kv_transfer_params and their leases are released at once")
		}
	}
	var b [4]byte
	rand.Read(b[:])
	s.idPrefix = hex.EncodeToString(b[:]) + "-"
	s.created = time.Now().Unix()
	s.modelsBody = openai.AppendModelList(nil, []openai.ModelCard{s.baseCard()})
	s.versionBody = append(append([]byte(`{"version":`), strconv.Quote(cfg.Version)...), '}')
	s.calls.New = func() any { return &call{seqState: seqState{s: s}} }
	return s, nil
}

// Metrics returns the server's metrics.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// Header values, shared: net/http only reads them.
var (
	hdrJSON        = []string{"application/json"}
	hdrEventStream = []string{"text/event-stream"}
	hdrNoCache     = []string{"no-cache"}
	hdrText        = []string{"text/plain; charset=utf-8"}
)

const (
	abortPrefix = "/kvlease/v1/requests/"
	abortSuffix = "/abort"
)

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.APIKeys.Enabled() && r.Method != http.MethodOptions && needsKey(r.URL.Path) &&
		!s.cfg.APIKeys.Allow(r.Header.Get("Authorization")) {
		w.Header()["Www-Authenticate"] = []string{"Bearer"}
		s.writeError(w, "", openai.Unauthorized())
		return
	}
	switch p := r.URL.Path; p {
	case "/v1/completions":
		if s.method(w, r, http.MethodPost) {
			s.generate(w, r, false)
		}
	case "/v1/chat/completions":
		if s.method(w, r, http.MethodPost) {
			s.generate(w, r, true)
		}
	case "/v1/models":
		if s.method(w, r, http.MethodGet) {
			s.models(w)
		}
	case loadLoRAPath, unloadLoRAPath:
		s.serveLoRA(w, r, p == loadLoRAPath)
	case "/tokenize":
		if s.method(w, r, http.MethodPost) {
			s.tokenize(w, r)
		}
	case "/detokenize":
		if s.method(w, r, http.MethodPost) {
			s.detokenize(w, r)
		}
	case "/health":
		if s.method(w, r, http.MethodGet) {
			s.health(w)
		}
	case "/version":
		if s.method(w, r, http.MethodGet) {
			s.writeJSON(w, http.StatusOK, s.versionBody)
		}
	case "/metrics":
		if s.method(w, r, http.MethodGet) {
			s.promH.ServeHTTP(w, r)
		}
	default:
		if strings.HasPrefix(p, FaultsPath) {
			s.serveFaults(w, r)
			return
		}
		if len(p) >= len(abortPrefix)+len(abortSuffix) && strings.HasPrefix(p, abortPrefix) && strings.HasSuffix(p, abortSuffix) {
			if s.method(w, r, http.MethodPost) {
				s.abort(w, r)
			}
			return
		}
		s.writeError(w, "", openai.NotFound("no route %s %s", r.Method, p))
	}
}

// needsKey reports whether path needs an API key when keys are set: what
// vLLM guards (every path starting with /v1) and the abort endpoint, which
// can end anyone's request.
func needsKey(path string) bool {
	return strings.HasPrefix(path, "/v1") || strings.HasPrefix(path, abortPrefix) ||
		path == "/tokenize" || path == "/detokenize" // they spend CPU on request
}

// method answers 405 unless r uses want (GET also admits HEAD).
func (s *Server) method(w http.ResponseWriter, r *http.Request, want string) bool {
	if r.Method == want || (want == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header()["Allow"] = []string{want}
	e := &openai.Error{Status: http.StatusMethodNotAllowed, Type: openai.TypeInvalidRequest,
		Message: "method " + r.Method + " is not allowed on " + r.URL.Path + "; use " + want}
	s.writeError(w, "", e)
	return false
}

// health answers 200 while the engine takes requests and 503 once it
// drains, so load balancers stop sending before it stops.
func (s *Server) health(w http.ResponseWriter) {
	if s.eng.Draining() {
		s.writeError(w, "", openai.Unavailable("the engine is shutting down"))
		return
	}
	w.Header()["Content-Type"] = hdrText
	w.WriteHeader(http.StatusOK)
}

// abort serves POST /kvlease/v1/requests/{id}/abort. The id is the path
// segment (percent-decoded by net/http), or X-Request-Id when the segment
// is empty. Answers: 200 {"id","result":"aborted"} when the request was
// live; 200 {"id","result":"already_finished"} when it had finished (on a
// prefill engine its lease, if any, is revoked, or released at once if its
// response was never delivered); 404 when the engine does not know it.
func (s *Server) abort(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	id := p[len(abortPrefix) : len(p)-len(abortSuffix)]
	if id == "" || strings.Contains(id, "/") {
		id = r.Header.Get("X-Request-Id")
	}
	if e := checkRequestID(id); e != nil || id == "" {
		if e == nil {
			e = openai.BadRequest("id", "the request id is missing: POST /kvlease/v1/requests/{id}/abort")
		}
		s.writeError(w, "", e)
		return
	}
	var result string
	switch s.eng.Abort(id) {
	case engine.Aborted:
		result = "aborted"
	case engine.AbortAlreadyFinished:
		result = "already_finished"
	default:
		e := openai.NotFound("no request with id %q is known to this engine", id)
		e.Param = "id"
		s.writeError(w, id, e)
		return
	}
	body := append([]byte(`{"id":`), strconv.Quote(id)...)
	body = append(append(append(body, `,"result":"`...), result...), `"}`...)
	s.writeJSON(w, http.StatusOK, body)
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	w.Write(body)
}

// writeError writes e as OpenAI's error body with its status, its
// Retry-After and the request id, if known.
func (s *Server) writeError(w http.ResponseWriter, id string, e *openai.Error) {
	h := w.Header()
	if id != "" {
		h["X-Request-Id"] = []string{id}
	}
	if ra := e.RetryAfterSeconds(); ra != "" {
		h["Retry-After"] = []string{ra}
	}
	if e.Status >= 500 && e.Status != http.StatusServiceUnavailable {
		s.log.Warn("request failed", "req", id, "status", e.Status, "reason", e.Message)
	}
	s.writeJSON(w, e.Status, openai.AppendError(nil, e))
}

// requestID returns the client's X-Request-Id, checked, or a new one.
func (s *Server) requestID(r *http.Request) (string, *openai.Error) {
	v := r.Header["X-Request-Id"]
	if len(v) == 0 || v[0] == "" {
		var buf [64]byte // one allocation: the string
		return string(strconv.AppendUint(append(buf[:0], s.idPrefix...), s.nextID.Add(1), 16)), nil
	}
	return v[0], checkRequestID(v[0])
}

// checkRequestID accepts what fits in a URL path segment once escaped and
// in a log line: printable ASCII except space, '/', '?', '#' and '%', at
// most MaxRequestIDBytes (the proxy's rule).
func checkRequestID(id string) *openai.Error {
	if len(id) > MaxRequestIDBytes {
		return openai.BadRequest("X-Request-Id", "X-Request-Id is longer than %d bytes", MaxRequestIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '/' || c == '?' || c == '#' || c == '%' {
			return openai.BadRequest("X-Request-Id",
				"X-Request-Id may hold printable ASCII except space, '/', '?', '#' and '%%'")
		}
	}
	return nil
}

// maxPresize bounds the buffer readBody allocates from a request's
// Content-Length.
const maxPresize = 256 << 10

// readBody reads r's body into buf, bounded by MaxBodyBytes.
func (s *Server) readBody(r *http.Request, buf []byte) ([]byte, *openai.Error) {
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return buf, openai.TooLarge("the request body is %d bytes; at most %d are accepted", r.ContentLength, limit)
	}
	// A declared length is not trusted with more memory than maxPresize
	// before the bytes come (as the proxy's readAllBounded): a longer body
	// grows the buffer as it arrives.
	if want := min(r.ContentLength, maxPresize); want > 0 && int64(cap(buf)) < want {
		buf = make([]byte, 0, want)
	}
	buf = buf[:0]
	body := io.LimitReader(r.Body, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, openai.TooLarge("the request body is over %d bytes", limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, openai.BadRequest("", "reading the request body failed: %v", err)
		}
	}
}
