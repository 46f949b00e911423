package httpapi

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvlease/kvlease/faultapi"
	"github.com/kvlease/kvlease/openai"
)

// FaultsPath is the fault-injection API's endpoint: POST adds a fault, GET
// lists the active ones, DELETE clears them all (or one, at
// FaultsPath/{id}).
const FaultsPath = "/kvlease/v1/faults"

// ReturnErrorHeader is llm-d's inference simulator's deterministic error
// trigger, honoured when the fault API is on: an integer status answers the
// request at once with that status; anything else is a 400.
const ReturnErrorHeader = "X-Return-Error"

// FaultConfig turns the fault-injection API on (Config.Faults).
type FaultConfig struct {
	// AdminKey is required as "Authorization: Bearer <key>" on FaultsPath
	// (compared in constant time). It must not be empty.
	AdminKey string
	// MaxActive bounds the active faults; faultapi.DefaultMaxActive when ≤ 0.
	MaxActive int
	// Seed seeds the draws of the faults' rates, for a reproducible run; 0
	// draws a random seed.
	Seed uint64
}

// faultState is the server's fault registry and what carries its decisions
// out. Safe for concurrent use.
type faultState struct {
	admin openai.APIKeys

	mu  sync.Mutex
	reg *faultapi.Registry
	rng *rand.Rand

	injected *prometheus.CounterVec
}

func (s *Server) initFaults(fc *FaultConfig) error {
	if fc.AdminKey == "" {
		return errors.New("httpapi: the fault API needs an admin key (Config.Faults.AdminKey)")
	}
	seed := fc.Seed
	if seed == 0 {
		var b [8]byte
		crand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	f := &faultState{
		admin: openai.NewAPIKeys(fc.AdminKey),
		reg:   faultapi.NewRegistry(fc.MaxActive),
		rng:   rand.New(rand.NewPCG(seed, seed^0x6661756c74)),
	}
	labels := prometheus.Labels{"model_name": s.cfg.ModelName}
	f.injected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kvlease_faults_injected_total", ConstLabels: labels,
		Help: "Faults the fault-injection API injected, by kind (a request hit by a fault, or an X-Return-Error header).",
	}, []string{"kind"})
	for _, k := range faultapi.Kinds() {
		f.injected.WithLabelValues(k.String())
	}
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kvlease_faults_active", ConstLabels: labels,
		Help: "Faults active in the fault-injection API.",
	}, func() float64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return float64(f.reg.Len())
	})
	if err := s.metrics.Registry().Register(f.injected); err != nil {
		return err
	}
	if err := s.metrics.Registry().Register(active); err != nil {
		return err
	}
	s.faults = f
	return nil
}

// serveFaults serves FaultsPath and FaultsPath/{id}.
func (s *Server) serveFaults(w http.ResponseWriter, r *http.Request) {
	f := s.faults
	if f == nil {
		s.writeError(w, "", openai.NotFound("the fault-injection API is off: start the engine with --enable-fault-api and --admin-key"))
		return
	}
	if !f.admin.Allow(r.Header.Get("Authorization")) {
		w.Header()["Www-Authenticate"] = []string{"Bearer"}
		s.writeError(w, "", openai.Unauthorized())
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, FaultsPath)
	if rest != "" {
		id, err := strconv.ParseUint(strings.TrimPrefix(rest, "/"), 10, 64)
		if err != nil || !strings.HasPrefix(rest, "/") {
			s.writeError(w, "", openai.NotFound("no route %s %s: a fault is %s/{id}, id a number", r.Method, r.URL.Path, FaultsPath))
			return
		}
		if s.method(w, r, http.MethodDelete) {
			s.deleteFault(w, id)
		}
		return
	}
	switch r.Method {
	case http.MethodPost:
		s.addFault(w, r)
	case http.MethodGet, http.MethodHead:
		s.listFaults(w)
	case http.MethodDelete:
		f.mu.Lock()
		n := f.reg.Clear()
		f.mu.Unlock()
		s.log.Info("faults cleared", "faults", n)
		s.writeJSON(w, http.StatusOK, append(strconv.AppendInt([]byte(`{"deleted":`), int64(n), 10), '}'))
	default:
		w.Header()["Allow"] = []string{"GET, POST, DELETE"}
		s.writeError(w, "", &openai.Error{Status: http.StatusMethodNotAllowed, Type: openai.TypeInvalidRequest,
			Message: "method " + r.Method + " is not allowed on " + FaultsPath + "; use GET, POST or DELETE"})
	}
}

func (s *Server) addFault(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > faultapi.MaxSpecBytes {
		s.writeError(w, "", openai.TooLarge("a fault spec is at most %d bytes", faultapi.MaxSpecBytes))
		return
	}
	body, e := readSpec(r)
	if e != nil {
		s.writeError(w, "", e)
		return
	}
	spec, err := faultapi.ParseSpec(body)
	if err != nil {
		var fe *faultapi.Error
		errors.As(err, &fe)
		s.writeError(w, "", openai.BadRequest(fe.Field, "%s", fe.Error()))
		return
	}
	f := s.faults
	f.mu.Lock()
	flt, err := f.reg.Add(s.eng.Now(), spec)
	f.mu.Unlock()
	if err != nil {
		s.writeError(w, "", &openai.Error{Status: http.StatusConflict, Type: openai.TypeInvalidRequest,
			Message: "too many active faults: delete some first (DELETE " + FaultsPath + ")"})
		return
	}
	s.log.Info("fault added", "fault", flt.ID, "kind", spec.Kind.String(), "spec", string(spec.AppendJSON(nil)))
	s.writeJSON(w, http.StatusOK, flt.AppendJSON(nil, s.eng.Now()))
}

func (s *Server) listFaults(w http.ResponseWriter) {
	f := s.faults
	now := s.eng.Now()
	f.mu.Lock()
	list := f.reg.List(now)
	f.mu.Unlock()
	out := []byte(`{"faults":[`)
	for i := range list {
		if i > 0 {
			out = append(out, ',')
		}
		out = list[i].AppendJSON(out, now)
	}
	s.writeJSON(w, http.StatusOK, append(out, "]}"...))
}

func (s *Server) deleteFault(w http.ResponseWriter, id uint64) {
	f := s.faults
	f.mu.Lock()
	ok := f.reg.Delete(id)
	f.mu.Unlock()
	if !ok {
		s.writeError(w, "", openai.NotFound("no active fault %d", id))
		return
	}
	s.log.Info("fault deleted", "fault", id)
	s.writeJSON(w, http.StatusOK, append(strconv.AppendUint([]byte(`{"deleted":1,"id":`), id, 10), '}'))
}

// readSpec reads a fault spec's body, at most faultapi.MaxSpecBytes (413
// beyond).
func readSpec(r *http.Request) ([]byte, *openai.Error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, faultapi.MaxSpecBytes+1))
	if err != nil {
		return nil, openai.BadRequest("", "reading the request body failed: %v", err)
	}
	if len(b) > faultapi.MaxSpecBytes {
		return nil, openai.TooLarge("a fault spec is at most %d bytes", faultapi.MaxSpecBytes)
	}
	return b, nil
}

// injectFaults decides the faults that hit generation request c (its
// engine request built, nothing sent) and carries out those that act
// before the engine sees it. It reports false when the request was
// answered (an injected error) or its client left during an injected
// latency; P was then told of a lease the request carried.
func (s *Server) injectFaults(w http.ResponseWriter, r *http.Request, c *call) bool {
	f := s.faults
	if v := r.Header[ReturnErrorHeader]; len(v) > 0 && v[0] != "" {
		code, err := strconv.Atoi(v[0])
		var e *openai.Error
		switch {
		case err != nil:
			e = openai.BadRequest(ReturnErrorHeader, "Invalid %s header value %q: must be an integer", ReturnErrorHeader, v[0])
		case code < 400 || code > 599:
			e = openai.BadRequest(ReturnErrorHeader, "Invalid %s header value %d: must be an HTTP error status, 400..599", ReturnErrorHeader, code)
		default:
			e = injectedError(code, "Simulated error triggered by "+ReturnErrorHeader+" header (code "+v[0]+")")
		}
		f.injected.WithLabelValues(faultapi.HTTPError.String()).Inc()
		s.log.Info("fault injected", "req", c.id, "kind", faultapi.HTTPError.String(), "source", ReturnErrorHeader, "status", e.Status)
		s.fail(w, r, &c.req, e)
		return false
	}
	q := faultapi.Request{ID: c.id, Prefill: c.req.RemoteDecode, Decode: c.req.Remote != nil}
	now := s.eng.Now()
	f.mu.Lock()
	if f.reg.Len() == 0 {
		f.mu.Unlock()
		return true
	}
	p := f.reg.Decide(now, f.rng, q)
	f.mu.Unlock()
	if p.Empty() {
		return true
	}
	for _, x := range p.Fired {
		f.injected.WithLabelValues(x.Kind.String()).Inc()
		s.log.Info("fault injected", "req", c.id, "fault", x.ID, "kind", x.Kind.String())
	}
	switch {
	case p.HTTPStatus > 0:
		s.fail(w, r, &c.req, injectedError(p.HTTPStatus, "injected fault: http_error "+strconv.Itoa(p.HTTPStatus)))
		return false
	case p.RejectStatus > 0:
		// The decode engine refuses the request after the prefill: P
		// hears RELEASE(rejected) through fail.
		s.fail(w, r, &c.req, injectedError(p.RejectStatus, "injected fault: the decode engine rejects the request ("+strconv.Itoa(p.RejectStatus)+")"))
		return false
	}
	if p.Latency > 0 && !wait(r, p.Latency) {
		s.reject(&c.req) // the client left: nobody will pull the lease
		return false
	}
	if c.req.RemoteDecode {
		c.req.LeaseFaults = p.LeaseFaults()
		c.answerDelay, c.dropAnswer = p.DelayAnswer, p.DropAnswer
	}
	if c.req.Remote != nil {
		c.req.Remote.Faults = p.PullFaults()
	}
	return true
}

// injectedError is an injected error answer with status, in OpenAI's
// shape, with the error type that goes with the status.
func injectedError(status int, msg string) *openai.Error {
	typ := openai.TypeInvalidRequest
	switch {
	case status == http.StatusNotFound:
		typ = openai.TypeNotFound
	case status == http.StatusTooManyRequests:
		typ = openai.TypeRateLimit
	case status >= 500:
		typ = openai.TypeServer
	}
	return &openai.Error{Status: status, Type: typ, Message: msg}
}

// wait waits d, or until r's client leaves (false).
func wait(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// answerFaults carries out the faults on a prefill answer whose lease was
// granted (st's request), before it is written: a delay (the lease's clock
// runs), or a dropped answer (the connection is closed, the lease released
// as undelivered). It reports false when nothing must be written.
func (s *Server) answerFaults(r *http.Request, c *call, delivered func(bool)) bool {
	if c.answerDelay > 0 && !wait(r, c.answerDelay) {
		delivered(false) // the client left meanwhile
		return false
	}
	if c.dropAnswer {
		delivered(false)
		// Close the connection without an answer, as a crash or a network
		// failure between the grant and the answer would.
		panic(http.ErrAbortHandler)
	}
	return true
}
