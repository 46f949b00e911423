package httpapi

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kvlease/kvlease/engine"
	"github.com/kvlease/kvlease/openai"
)

// LoRA adapters, as vLLM serves them (--enable-lora, --lora-modules,
// --max-loras, /v1/load_lora_adapter, /v1/unload_lora_adapter): a request
// names an adapter as its model; the adapter's card is in /v1/models with
// the base model as its parent; responses name the adapter as their model.
//
// An adapter is a directory as PEFT writes it: adapter_config.json (a JSON
// object; peft_type, when given, LORA; r, when given, a rank from 1 to
// MaxLoRARank), and the weights beside it (adapter_model.safetensors or
// adapter_model.bin), optional here. The simulated model does not multiply
// low-rank matrices: it keys its KV by a digest of the adapter's files
// (engine.Adapter.Digest), so an adapter changes every output token, and
// engines with the same files — a prefill and a decode engine — agree.

// Defaults of LoRAConfig.
const (
	DefaultMaxLoRAs       = 1  // vLLM's --max-loras default
	DefaultMaxLoRARank    = 16 // vLLM's --max-lora-rank default
	DefaultMaxLoRAModules = 256
	// maxAdapterConfigBytes bounds adapter_config.json (PEFT writes about
	// a kilobyte).
	maxAdapterConfigBytes = 1 << 20
	// MaxAdapterNameBytes bounds an adapter's name, as --model's.
	MaxAdapterNameBytes = 256
)

// LoRAConfig turns LoRA adapters on (vLLM's --enable-lora).
type LoRAConfig struct {
	// MaxLoRAs is the most distinct adapters in one batch (the engine's
	// sched.Config.MaxLoRAs enforces it), exported as the max_lora label
	// of vllm:lora_requests_info. Zero means DefaultMaxLoRAs.
	MaxLoRAs int
	// MaxLoRARank is the highest rank (adapter_config.json's r) an adapter
	// may have. Zero means DefaultMaxLoRARank.
	MaxLoRARank int
	// MaxModules bounds the adapters loaded at once; a load beyond it is
	// refused (400). Zero means DefaultMaxLoRAModules.
	MaxModules int
	// Modules are loaded by New, which fails if one does not load
	// (--lora-modules).
	Modules []LoRAModule
	// RuntimeUpdates serves POST /v1/load_lora_adapter and
	// /v1/unload_lora_adapter (vLLM serves them when
	// VLLM_ALLOW_RUNTIME_LORA_UPDATING is set). Off, they answer 404, as
	// vLLM's unregistered routes do.
	RuntimeUpdates bool
}

// LoRAModule is an adapter to serve: vLLM's LoRAModulePath.
type LoRAModule struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// BaseModelName, when given, must be the served model's name: it is
	// the adapter card's parent.
	BaseModelName string `json:"base_model_name,omitempty"`
}

// loraSet is the loaded adapters. Safe for concurrent use.
type loraSet struct {
	cfg  LoRAConfig
	base string

	mu     sync.RWMutex
	byName map[string]*loraEntry
	order  []*loraEntry // load order, for /v1/models
	nextID int32
	// loading serializes loads, so two loads of one name do not both
	// pass the duplicate check while the files are read.
	loading sync.Mutex
}

type loraEntry struct {
	adapter engine.Adapter
	path    string
	created int64
}

func newLoRASet(cfg LoRAConfig, base string) (*loraSet, error) {
	if cfg.MaxLoRAs == 0 {
		cfg.MaxLoRAs = DefaultMaxLoRAs
	}
	if cfg.MaxLoRARank == 0 {
		cfg.MaxLoRARank = DefaultMaxLoRARank
	}
	if cfg.MaxModules == 0 {
		cfg.MaxModules = DefaultMaxLoRAModules
	}
	if cfg.MaxLoRAs < 0 || cfg.MaxLoRARank < 0 || cfg.MaxModules < 0 {
		return nil, fmt.Errorf("httpapi: LoRAConfig limits must be positive (MaxLoRAs %d, MaxLoRARank %d, MaxModules %d)",
			cfg.MaxLoRAs, cfg.MaxLoRARank, cfg.MaxModules)
	}
	l := &loraSet{cfg: cfg, base: base, byName: make(map[string]*loraEntry)}
	for _, m := range cfg.Modules {
		if m.BaseModelName != "" && m.BaseModelName != base {
			return nil, fmt.Errorf("LoRA module %q: base_model_name %q is not the served model %q", m.Name, m.BaseModelName, base)
		}
		if e := l.load(m.Name, m.Path, false); e != nil {
			return nil, fmt.Errorf("LoRA module %q: %s", m.Name, e.Message)
		}
	}
	return l, nil
}

// lookup returns the adapter served as name.
func (l *loraSet) lookup(name string) (engine.Adapter, bool) {
	l.mu.RLock()
	e, ok := l.byName[name]
	l.mu.RUnlock()
	if !ok {
		return engine.Adapter{}, false
	}
	return e.adapter, true
}

// cards returns the adapters' /v1/models cards, in load order.
func (l *loraSet) cards() []openai.ModelCard {
	l.mu.RLock()
	defer l.mu.RUnlock()
	cs := make([]openai.ModelCard, 0, len(l.order))
	for _, e := range l.order {
		cs = append(cs, openai.ModelCard{ID: e.adapter.Name, Created: e.created, Root: e.path, Parent: l.base})
	}
	return cs
}

// checkAdapterName accepts what can be a model name in a request, a
// Prometheus label list item and a log field: 1..MaxAdapterNameBytes
// printable ASCII bytes other than space and ','.
func checkAdapterName(name string) error {
	if name == "" || len(name) > MaxAdapterNameBytes {
		return fmt.Errorf("a LoRA adapter's name must have 1 to %d bytes", MaxAdapterNameBytes)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == ',' {
			return fmt.Errorf("a LoRA adapter's name may hold printable ASCII except space and ','; %q does not", name)
		}
	}
	return nil
}

// load reads the adapter at path and serves it as name (replacing the
// adapter of that name when inplace). The answer is vLLM's: 400 for a
// bad request or an adapter that does not load, 404 when path holds no
// adapter.
func (l *loraSet) load(name, path string, inplace bool) *openai.Error {
	if name == "" || path == "" {
		return loraError(400, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided.")
	}
	if err := checkAdapterName(name); err != nil {
		return loraError(400, "InvalidUserInput", err.Error())
	}
	if name == l.base {
		return loraError(400, "InvalidUserInput", fmt.Sprintf("'%s' is the base model's name; give the adapter another", name))
	}
	l.loading.Lock()
	defer l.loading.Unlock()
	l.mu.RLock()
	_, loaded := l.byName[name]
	n := len(l.order)
	l.mu.RUnlock()
	switch {
	case loaded && !inplace:
		return loraError(400, "InvalidUserInput", fmt.Sprintf(
			"The lora adapter '%s' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.", name))
	case !loaded && n >= l.cfg.MaxModules:
		return loraError(400, "BadRequestError", fmt.Sprintf(
			"%d LoRA adapters are loaded, the most this engine serves; unload one first", n))
	}
	digest, err := readAdapter(path, l.cfg.MaxLoRARank)
	if err != nil {
		var nf notFoundError
		if errors.As(err, &nf) {
			return loraError(404, "NotFoundError", fmt.Sprintf("Loading lora %s failed: No adapter found for %s: %v", name, path, err))
		}
		return loraError(400, "BadRequestError", fmt.Sprintf("Loading lora %s failed: %v", name, err))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &loraEntry{path: path, created: time.Now().Unix()}
	// An unload may have run while the files were read: look again.
	if old, ok := l.byName[name]; ok {
		e.adapter = engine.Adapter{Name: name, ID: old.adapter.ID, Digest: digest}
		for i, o := range l.order {
			if o == old {
				l.order[i] = e
			}
		}
	} else {
		l.nextID++
		e.adapter = engine.Adapter{Name: name, ID: l.nextID, Digest: digest}
		l.order = append(l.order, e)
	}
	l.byName[name] = e
	return nil
}

// unload stops serving name. Requests already admitted with it finish
// with it.
func (l *loraSet) unload(name string) *openai.Error {
	if name == "" {
		return loraError(400, "InvalidUserInput", "'lora_name' needs to be provided to unload a LoRA adapter.")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byName[name]
	if !ok {
		return loraError(404, "NotFoundError", fmt.Sprintf("The lora adapter '%s' cannot be found.", name))
	}
	delete(l.byName, name)
	for i, o := range l.order {
		if o == e {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
	return nil
}

// loraError is an error of the adapter endpoints, with vLLM's types.
func loraError(status int, typ, msg string) *openai.Error {
	return &openai.Error{Status: status, Type: typ, Message: msg}
}

// notFoundError marks a path that holds no adapter.
type notFoundError struct{ error }

// readAdapter checks the adapter directory at path and returns the digest
// of its files: SHA-256 over adapter_config.json and, when present, the
// weights file, its first 8 bytes (never 0, the base model's).
func readAdapter(path string, maxRank int) (uint64, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, notFoundError{errors.New("the path does not exist (kvlease loads adapters from local directories only)")}
	case err != nil:
		return 0, err
	case !st.IsDir():
		return 0, notFoundError{errors.New("the path is not a directory holding adapter_config.json")}
	}
	cfgPath := filepath.Join(path, "adapter_config.json")
	f, err := os.Open(cfgPath)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, notFoundError{errors.New("the directory has no adapter_config.json")}
	}
	if err != nil {
		return 0, err
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxAdapterConfigBytes+1))
	f.Close()
	if err != nil {
		return 0, err
	}
	if len(raw) > maxAdapterConfigBytes {
		return 0, fmt.Errorf("adapter_config.json is over %d bytes", maxAdapterConfigBytes)
	}
	var cfg struct {
		PEFTType *string `json:"peft_type"`
		Rank     *int    `json:"r"`
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return 0, fmt.Errorf("adapter_config.json is not a JSON object: %v", err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return 0, fmt.Errorf("adapter_config.json: %v", err)
	}
	if cfg.PEFTType != nil && !strings.EqualFold(*cfg.PEFTType, "LORA") {
		return 0, fmt.Errorf("adapter_config.json: peft_type %q is not LORA", *cfg.PEFTType)
	}
	if cfg.Rank != nil && (*cfg.Rank < 1 || *cfg.Rank > maxRank) {
		if *cfg.Rank > maxRank {
			return 0, fmt.Errorf("LoRA rank %d is greater than max_lora_rank %d", *cfg.Rank, maxRank)
		}
		return 0, fmt.Errorf("adapter_config.json: rank r %d must be positive", *cfg.Rank)
	}
	h := sha256.New()
	h.Write([]byte("kvlease lora adapter v1\x00"))
	h.Write(raw)
	for _, w := range []string{"adapter_model.safetensors", "adapter_model.bin"} {
		wf, err := os.Open(filepath.Join(path, w))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		h.Write([]byte("\x00" + w + "\x00"))
		_, err = io.Copy(h, wf)
		wf.Close()
		if err != nil {
			return 0, fmt.Errorf("%s: %v", w, err)
		}
		break
	}
	d := binary.LittleEndian.Uint64(h.Sum(nil))
	if d == 0 {
		d = 1
	}
	return d, nil
}

// resolveModel returns the adapter a request's model names: the zero
// Adapter for the base model (or an empty model), a loaded adapter's, or
// vLLM's 404.
func (s *Server) resolveModel(name string) (engine.Adapter, *openai.Error) {
	if name == "" || name == s.cfg.ModelName {
		return engine.Adapter{}, nil
	}
	if s.loras != nil {
		if a, ok := s.loras.lookup(name); ok {
			return a, nil
		}
	}
	return engine.Adapter{}, openai.ModelNotFound(name)
}

// models serves GET /v1/models: the base model's card, then the adapters'.
func (s *Server) models(w http.ResponseWriter) {
	if s.loras == nil {
		s.writeJSON(w, http.StatusOK, s.modelsBody)
		return
	}
	cards := append([]openai.ModelCard{s.baseCard()}, s.loras.cards()...)
	s.writeJSON(w, http.StatusOK, openai.AppendModelList(nil, cards))
}

func (s *Server) baseCard() openai.ModelCard {
	return openai.ModelCard{ID: s.cfg.ModelName, Created: s.created, MaxModelLen: s.ecfg.MaxModelLen}
}

// Adapter endpoints' paths.
const (
	loadLoRAPath   = "/v1/load_lora_adapter"
	unloadLoRAPath = "/v1/unload_lora_adapter"
)

// serveLoRA serves POST /v1/load_lora_adapter ({"lora_name", "lora_path",
// "load_inplace"}) and /v1/unload_lora_adapter ({"lora_name"}). Success is
// vLLM's 200 with a plain-text sentence; errors are vLLM's statuses and
// messages in OpenAI's error shape.
func (s *Server) serveLoRA(w http.ResponseWriter, r *http.Request, load bool) {
	if s.loras == nil || !s.loras.cfg.RuntimeUpdates {
		s.writeError(w, "", openai.NotFound("no route %s %s: runtime LoRA updates are off "+
			"(serve with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=true)", r.Method, r.URL.Path))
		return
	}
	if !s.method(w, r, http.MethodPost) {
		return
	}
	body, e := s.readBody(r, nil)
	if e != nil {
		s.writeError(w, "", e)
		return
	}
	var req struct {
		Name    string `json:"lora_name"`
		Path    string `json:"lora_path"`
		Inplace bool   `json:"load_inplace"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeError(w, "", loraError(400, "BadRequestError", "the body is not a JSON object with string lora_name and lora_path: "+err.Error()))
		return
	}
	var msg string
	if load {
		e = s.loras.load(req.Name, req.Path, req.Inplace)
		msg = fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", req.Name)
	} else {
		e = s.loras.unload(req.Name)
		msg = fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", req.Name)
	}
	if e != nil {
		s.writeError(w, "", e)
		return
	}
	if load {
		s.log.Info("loaded a LoRA adapter", "adapter", req.Name, "path", req.Path)
	} else {
		s.log.Info("unloaded a LoRA adapter", "adapter", req.Name)
	}
	w.Header()["Content-Type"] = hdrText
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, msg)
}
