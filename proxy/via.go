package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/kvlease/kvlease/openai"
)

// A proxy told to use itself as an engine (or another proxy that routes
// back to it) would forward each request to itself until its
// concurrency limit. As HTTP proxies do (RFC 9110, 7.6.3), each proxy
// appends its own entry to Via on every request it sends an engine and
// refuses a request that already carries that entry.

// newViaName returns a proxy's pseudonym in Via: "kvlease-" and 16 random
// hex digits, so that two proxies, or two runs of one, never share it.
func newViaName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "kvlease-" + hex.EncodeToString(b[:]), nil
}

// via returns the Via header of a request the proxy sends on behalf of
// client request r: r's own Via entries, then the proxy's. Shared, not to
// be changed; it allocates only when r came with a Via or over neither
// HTTP/1.1 nor HTTP/2.
func (p *Proxy) via(r *http.Request) []string {
	own := p.via11
	switch {
	case r.ProtoMajor == 2:
		own = p.via2
	case r.ProtoMajor != 1 || r.ProtoMinor != 1:
		own = []string{strconv.Itoa(r.ProtoMajor) + "." + strconv.Itoa(r.ProtoMinor) + " " + p.viaName}
	}
	in := r.Header["Via"]
	if len(in) == 0 {
		return own
	}
	return append(append(make([]string, 0, len(in)+1), in...), own[0])
}

// looped reports whether header h's Via names this proxy: the request was
// sent by this proxy, so one of its engine URLs leads back to it.
func (p *Proxy) looped(h http.Header) bool {
	vs := h["Via"]
	return len(vs) > 0 && viaNames(vs, p.viaName)
}

// viaNames reports whether Via field values vs have an entry received by
// name: "protocol received-by [comment]", comma-separated.
func viaNames(vs []string, name string) bool {
	for _, v := range vs {
		for v != "" {
			var member string
			member, v, _ = strings.Cut(v, ",")
			_, rest, ok := strings.Cut(strings.TrimLeft(member, " \t"), " ")
			if !ok {
				continue
			}
			by, _, _ := strings.Cut(strings.TrimLeft(rest, " \t"), " ")
			if by == name {
				return true
			}
		}
	}
	return false
}

// loopError is the answer to a request that came back to the proxy that
// sent it: 508 Loop Detected (RFC 5842), which a proxy forwarding it
// passes back as it came instead of trying another engine.
func (p *Proxy) loopError() *openai.Error {
	return &openai.Error{Status: http.StatusLoopDetected, Type: openai.TypeServer,
		Message: "this request already passed through this kvlease proxy (Via " + p.viaName +
			"): an engine URL in --prefill/--decode points back at the proxy"}
}
