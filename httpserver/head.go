package httpserver

import (
	"bytes"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
)

// statusError is a request the server refuses before its handler runs:
// the status and a short reason for the answer's body. The connection is
// closed after the answer.
type statusError struct {
	code   int
	reason string
}

func (e *statusError) Error() string { return strconv.Itoa(e.code) + " " + e.reason }

func badRequest(reason string) *statusError {
	return &statusError{http.StatusBadRequest, reason}
}

var (
	errTooLarge      = &statusError{http.StatusRequestHeaderFieldsTooLarge, "request header fields too large"}
	errVersion       = &statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	errMalformed     = badRequest("malformed HTTP request")
	errTLS           = badRequest("client sent a TLS handshake to an HTTP server")
	errUnsupportedTE = &statusError{http.StatusNotImplemented, "unsupported transfer encoding"}
)

// maxMethodBytes bounds a request's method: a first line whose first
// maxMethodBytes bytes hold no space is not HTTP, and is refused before
// its end comes (a TLS ClientHello, binary garbage).
const maxMethodBytes = 32

// head is a parsed request head: the request line and the header fields
// the server acts on. Its strings are substrings of the head's text.
type head struct {
	method, uri, proto string
	minor              int   // 0 or 1: HTTP/1.0 or HTTP/1.1
	contentLength      int64 // -1 with a chunked body
	chunked            bool
	close              bool // the client asked to close after this exchange
	keepAlive10        bool // an HTTP/1.0 client asked to keep the connection
	expectContinue     bool
	host               string
}

// checkStart refuses, before its line is complete, a first line that
// cannot be a request line: its method must be token bytes followed by a
// space within maxMethodBytes. It returns nil while b may still become a
// request line.
func checkStart(b []byte) *statusError {
	if len(b) > 0 && b[0] == 0x16 {
		return errTLS
	}
	for i, c := range b {
		if c == ' ' {
			if i == 0 {
				return errMalformed
			}
			return nil
		}
		if !tokenByte(c) || i >= maxMethodBytes {
			return errMalformed
		}
	}
	return nil
}

// headScan finds the end of a request's head in input that grows: the
// empty line that ends it. Lines end in LF, with an optional CR before
// it, as net/http reads them. Each byte is looked at once, however the
// head comes in pieces.
type headScan struct {
	line int // the start of the line being read
	pos  int // bytes before pos were looked at
}

// end returns the length of the head at the start of b (through its
// empty line), or -1 when that line has not come yet. b must hold what
// the previous calls saw, and more.
func (s *headScan) end(b []byte) int {
	for {
		j := bytes.IndexByte(b[s.pos:], '\n')
		if j < 0 {
			s.pos = len(b)
			return -1
		}
		nl := s.pos + j
		if s.line > 0 && (nl == s.line || nl == s.line+1 && b[s.line] == '\r') {
			return nl + 1
		}
		s.line, s.pos = nl+1, nl+1
	}
}

// parseHead parses the head text s (request line, header lines and the
// empty line) into h and hdr. hdr must be empty; vals is scratch space for
// the header's values, reused between requests. It applies the rules of
// net/http's reader and server (what it accepts reads as net/http reads
// it) and refuses more: folded lines, header names with spaces, a chunked
// body with a Content-Length or on HTTP/1.0, CONNECT.
func parseHead(s string, h *head, hdr http.Header, vals []string) ([]string, *statusError) {
	line, rest, _ := strings.Cut(s, "\n")
	line = strings.TrimSuffix(line, "\r")
	method, r, ok1 := strings.Cut(line, " ")
	uri, proto, ok2 := strings.Cut(r, " ")
	if !ok1 || !ok2 || method == "" || !validToken(method) {
		return vals, errMalformed
	}
	switch proto {
	case "HTTP/1.1":
		h.minor = 1
	case "HTTP/1.0":
		h.minor = 0
	default:
		if len(proto) == 8 && strings.HasPrefix(proto, "HTTP/") && isDigit(proto[5]) && proto[6] == '.' && isDigit(proto[7]) {
			return vals, errVersion
		}
		return vals, badRequest("malformed HTTP version")
	}
	if method == "CONNECT" {
		return vals, &statusError{http.StatusMethodNotAllowed, "CONNECT is not served"}
	}
	h.method, h.uri, h.proto = internMethod(method), uri, proto

	for {
		line, rest, _ = strings.Cut(rest, "\n")
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || k == "" || !validToken(k) {
			return vals, badRequest("malformed header line")
		}
		v = trimOWS(v)
		for i := 0; i < len(v); i++ {
			if !valueByte(v[i]) {
				return vals, badRequest("invalid header value")
			}
		}
		key := canonicalKey(k)
		vv := hdr[key]
		if vv == nil {
			vals = append(vals, v)
			hdr[key] = vals[len(vals)-1 : len(vals) : len(vals)]
		} else {
			hdr[key] = append(vv, v)
		}
	}
	if pragma, ok := hdr["Pragma"]; ok && len(pragma) > 0 && pragma[0] == "no-cache" {
		if _, ok := hdr["Cache-Control"]; !ok {
			hdr["Cache-Control"] = []string{"no-cache"}
		}
	}
	return vals, h.fields(hdr)
}

// fields applies the header fields the server acts on: Host, the body's
// framing, Connection, Expect.
func (h *head) fields(hdr http.Header) *statusError {
	hosts, haveHost := hdr["Host"]
	switch {
	case len(hosts) > 1:
		return badRequest("too many Host headers")
	case len(hosts) == 1:
		if !validHost(hosts[0]) {
			return badRequest("malformed Host header")
		}
		h.host = hosts[0]
	case h.minor == 1:
		return badRequest("missing required Host header")
	}
	if haveHost {
		delete(hdr, "Host")
	}

	h.contentLength, h.chunked = 0, false
	cls := hdr["Content-Length"]
	if len(cls) > 0 {
		for _, cl := range cls[1:] {
			if cl != cls[0] {
				return badRequest("conflicting Content-Length headers")
			}
		}
		if len(cls) > 1 {
			hdr["Content-Length"] = cls[:1]
		}
		n, err := strconv.ParseUint(cls[0], 10, 63)
		if err != nil {
			return badRequest("bad Content-Length")
		}
		h.contentLength = int64(n)
	}
	if te, ok := hdr["Transfer-Encoding"]; ok {
		switch {
		case h.minor == 0:
			return badRequest("Transfer-Encoding on HTTP/1.0")
		case len(te) != 1 || !strings.EqualFold(te[0], "chunked"):
			return errUnsupportedTE
		case len(cls) > 0:
			return badRequest("both Transfer-Encoding and Content-Length")
		}
		delete(hdr, "Transfer-Encoding")
		h.chunked, h.contentLength = true, -1
	}

	conn := hdr["Connection"]
	h.close, h.keepAlive10 = false, false
	if h.minor == 0 {
		h.keepAlive10 = hasToken(conn, "keep-alive") && !hasToken(conn, "close")
		h.close = !h.keepAlive10
	} else {
		h.close = hasToken(conn, "close")
	}

	h.expectContinue = false
	if ex, ok := hdr["Expect"]; ok && len(ex) > 0 && ex[0] != "" {
		if !strings.EqualFold(ex[0], "100-continue") || len(ex) > 1 {
			return &statusError{http.StatusExpectationFailed, "unsupported Expect"}
		}
		h.expectContinue = h.minor == 1 && h.contentLength != 0
	}
	return nil
}

// parseURI parses a request target into u as url.ParseRequestURI does:
// origin-form targets of plain bytes without allocating, others through
// url.ParseRequestURI.
func parseURI(uri string, u *url.URL) error {
	if len(uri) > 0 && uri[0] == '/' {
		path, query, hasQuery := strings.Cut(uri, "?")
		plain := !strings.Contains(query, "?")
		for i := 0; i < len(path) && plain; i++ {
			plain = pathByte(path[i])
		}
		for i := 0; i < len(query) && plain; i++ {
			c := query[i]
			plain = c > 0x20 && c < 0x7f && c != '#'
		}
		if plain && (!hasQuery || query != "") {
			*u = url.URL{Path: path, RawQuery: query}
			return nil
		}
	}
	p, err := url.ParseRequestURI(uri)
	if err != nil {
		return err
	}
	*u = *p
	return nil
}

// pathByte reports whether c stands for itself in a URL path (what
// url.URL.EscapedPath does not escape).
func pathByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.~$&+,/:;=@", c) >= 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// tokenByte reports whether c may appear in a token (RFC 9110 tchar): a
// method, a header name.
func tokenByte(c byte) bool { return tokenTable[c] }

var tokenTable = func() (t [256]bool) {
	for c := range 256 {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			t[c] = true
		case strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0:
			t[c] = true
		}
	}
	return t
}()

func validToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !tokenTable[s[i]] {
			return false
		}
	}
	return true
}

// valueByte reports whether c may appear in a header value: visible
// ASCII, space, tab and obs-text, as net/textproto accepts.
func valueByte(c byte) bool {
	return c == '\t' || (c >= 0x20 && c != 0x7f)
}

// validHost is httpguts.ValidHostHeader's rule: the bytes of a host,
// port, IPv6 literal or percent-encoding.
func validHost(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!$%&'()*+,-.:;=[]_~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// hasToken reports whether a comma-separated list among vs holds tok,
// ignoring case and spaces.
func hasToken(vs []string, tok string) bool {
	for _, v := range vs {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(trimOWS(part), tok) {
				return true
			}
		}
	}
	return false
}

// trimOWS trims spaces and tabs at both ends of s.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// canonicalKey is textproto.CanonicalMIMEHeaderKey without an allocation
// for a key already in canonical form.
func canonicalKey(k string) string {
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return textproto.CanonicalMIMEHeaderKey(k)
		}
		upper = c == '-'
	}
	return k
}

// internMethod returns the common methods as constants, so that a request
// does not keep its head's text alive through its method.
func internMethod(m string) string {
	switch m {
	case "GET":
		return http.MethodGet
	case "POST":
		return http.MethodPost
	case "HEAD":
		return http.MethodHead
	case "PUT":
		return http.MethodPut
	case "DELETE":
		return http.MethodDelete
	case "OPTIONS":
		return http.MethodOptions
	}
	return m
}
