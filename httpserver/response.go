package httpserver

import (
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"
)

// response is the http.ResponseWriter of one request. The head is
// rendered into the connection's write buffer with the body's first bytes
// when the handler returns (with a Content-Length), flushes, or writes
// more than pendBytes (chunked on HTTP/1.1, close-delimited on HTTP/1.0),
// so that a small answer leaves in one write.
type response struct {
	c           *conn
	body        *body
	head        bool // a HEAD request: no body is sent
	minor       int
	keepAlive10 bool
	status      int
	wroteHeader bool
	committed   bool
	chunked     bool
	closeAfter  bool  // close the connection after this answer
	declared    int64 // the handler's Content-Length, -1 without
	written     int64
	done        bool // the handler returned
	bodyLeft    bool // the request body was not read to its end
}

// pendBytes is how much of a body is held before the head is written:
// an answer this short gets a Content-Length.
const pendBytes = 4096

// largeWriteBytes is the size from which a body write goes to the socket
// from the caller's slice instead of through the write buffer.
const largeWriteBytes = 16 << 10

var (
	errWriteAfterDone              = errors.New("httpserver: write after the handler returned")
	_                 http.Flusher = (*response)(nil)
)

func (w *response) init(c *conn, h *head, b *body) {
	*w = response{c: c, body: b, head: h.method == http.MethodHead, minor: h.minor,
		keepAlive10: h.keepAlive10, closeAfter: h.close, declared: -1}
	clear(c.res)
	c.pend = c.pend[:0]
}

func (w *response) Header() http.Header { return w.c.res }

func (w *response) WriteHeader(code int) {
	if w.done {
		return
	}
	if code < 100 || code > 999 {
		panic("httpserver: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if w.wroteHeader {
		w.c.srv.logger().Debug("httpserver: superfluous WriteHeader call", "code", code)
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		// An informational answer leaves at once, before the final one.
		c := w.c
		c.wbuf = appendStatus(c.wbuf, code)
		c.wbuf = appendFields(c.wbuf, c.res)
		c.wbuf = append(c.wbuf, "\r\n"...)
		c.flushWire()
		return
	}
	w.status, w.wroteHeader = code, true
	if cl := w.c.res["Content-Length"]; len(cl) > 0 {
		n, err := strconv.ParseUint(cl[0], 10, 63)
		if err != nil || len(cl) > 1 {
			w.c.srv.logger().Debug("httpserver: invalid Content-Length set by the handler", "value", cl)
			delete(w.c.res, "Content-Length")
		} else {
			w.declared = int64(n)
		}
	}
}

// bodyAllowed reports whether the status may have a body (not 1xx, 204,
// 304).
func bodyAllowed(code int) bool {
	return code >= 200 && code != http.StatusNoContent && code != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	if w.done {
		return 0, errWriteAfterDone
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.declared >= 0 && w.written+int64(len(p)) > w.declared {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	c := w.c
	if !w.committed {
		if len(c.pend)+len(p) <= pendBytes {
			c.pend = append(c.pend, p...)
			return len(p), nil
		}
		w.commit(false)
	}
	if w.head {
		return len(p), nil
	}
	if err := w.writeBody(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeBody writes p, framed, after the head.
func (w *response) writeBody(p []byte) error {
	c := w.c
	if c.werr != nil {
		return c.werr
	}
	if len(p) == 0 {
		return nil
	}
	if w.chunked {
		c.wbuf = strconv.AppendUint(c.wbuf, uint64(len(p)), 16)
		c.wbuf = append(c.wbuf, "\r\n"...)
	}
	if len(p) >= largeWriteBytes {
		c.armWrite()
		bufs := net.Buffers{c.wbuf, p}
		if _, err := bufs.WriteTo(c.nc); err != nil {
			c.werr = err
		}
		c.wbuf = c.wbuf[:0]
	} else {
		c.wbuf = append(c.wbuf, p...)
	}
	if w.chunked {
		c.wbuf = append(c.wbuf, "\r\n"...)
	}
	if len(c.wbuf) >= pendBytes {
		c.flushWire()
	}
	return c.werr
}

// Flush sends what was written so far.
func (w *response) Flush() { w.FlushError() }

// FlushError sends what was written so far; http.ResponseController's
// Flush calls it.
func (w *response) FlushError() error {
	if w.done {
		return errWriteAfterDone
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(false)
	}
	w.c.flushWire()
	return w.c.werr
}

// sendContinue answers a request's Expect: 100-continue when its handler
// first reads the body, unless the answer has started.
func (w *response) sendContinue() {
	c := w.c
	if w.committed || w.done || c.werr != nil {
		return
	}
	c.armWrite()
	if _, err := c.nc.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
		c.werr = err
	}
}

// finish completes the answer when the handler returns and reads what it
// left of the request body.
func (w *response) finish() {
	c := w.c
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.bodyLeft = !c.discardBody(w.body)
		w.closeAfter = w.closeAfter || w.bodyLeft
		w.commit(true)
	} else if !c.discardBody(w.body) {
		w.bodyLeft, w.closeAfter = true, true
	}
	w.done = true
	if w.chunked {
		c.wbuf = append(c.wbuf, "0\r\n\r\n"...)
	}
	if w.declared >= 0 && w.written < w.declared && !w.head && bodyAllowed(w.status) {
		w.closeAfter = true // the client waits for bytes that will not come
	}
	c.flushWire()
}

// commit renders the head into the write buffer, then the body held so
// far. final: the handler has returned, so the body is all there.
func (w *response) commit(final bool) {
	c := w.c
	w.committed = true
	h := c.res
	allowed := bodyAllowed(w.status)
	if _, ok := h["Content-Type"]; !ok && allowed && len(c.pend) > 0 {
		h["Content-Type"] = []string{http.DetectContentType(c.pend)}
	}
	delete(h, "Transfer-Encoding")
	if hasToken(h["Connection"], "close") || c.srv.closed.Load() {
		w.closeAfter = true
	}
	c.wbuf = appendStatus(c.wbuf, w.status)
	c.wbuf = appendFields(c.wbuf, h)
	if _, ok := h["Date"]; !ok {
		c.wbuf = append(c.wbuf, "Date: "...)
		c.wbuf = append(c.wbuf, c.now()...)
		c.wbuf = append(c.wbuf, "\r\n"...)
	}
	switch {
	case !allowed:
	case w.declared >= 0:
	case final && (!w.head || w.written > 0):
		c.wbuf = append(c.wbuf, "Content-Length: "...)
		c.wbuf = strconv.AppendInt(c.wbuf, w.written, 10)
		c.wbuf = append(c.wbuf, "\r\n"...)
	case w.head:
	case w.minor == 1:
		w.chunked = true
		c.wbuf = append(c.wbuf, "Transfer-Encoding: chunked\r\n"...)
	default:
		w.closeAfter = true // HTTP/1.0: the body ends with the connection
	}
	if w.closeAfter {
		if !hasToken(h["Connection"], "close") {
			c.wbuf = append(c.wbuf, "Connection: close\r\n"...)
		}
	} else if w.minor == 0 && w.keepAlive10 {
		c.wbuf = append(c.wbuf, "Connection: keep-alive\r\n"...)
	}
	c.wbuf = append(c.wbuf, "\r\n"...)
	if len(c.pend) > 0 && allowed && !w.head {
		pend := c.pend
		c.pend = c.pend[:0]
		w.writeBody(pend)
	}
	c.pend = c.pend[:0]
}

// flushWire writes the write buffer to the socket.
func (c *conn) flushWire() {
	if len(c.wbuf) == 0 {
		return
	}
	if c.werr == nil {
		c.armWrite()
		if _, err := c.nc.Write(c.wbuf); err != nil {
			c.werr = err
		}
	}
	c.wbuf = c.wbuf[:0]
	if cap(c.wbuf) > maxKeptBytes {
		c.wbuf = make([]byte, 0, 4096) // after a long head
	}
}

// now is the Date header's value, formatted once a second.
func (c *conn) now() []byte {
	t := time.Now()
	if sec := t.Unix(); sec != c.dateSec || c.date == nil {
		c.dateSec = sec
		c.date = t.UTC().AppendFormat(c.date[:0], http.TimeFormat)
	}
	return c.date
}

func appendStatus(b []byte, code int) []byte {
	if code == http.StatusOK {
		return append(b, "HTTP/1.1 200 OK\r\n"...)
	}
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	if text := http.StatusText(code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

// appendFields renders header fields as net/http does: fields with
// invalid names are dropped, CR and LF in values become spaces.
func appendFields(b []byte, h http.Header) []byte {
	for k, vv := range h {
		if k == "" || !validToken(k) {
			continue
		}
		for _, v := range vv {
			b = append(b, k...)
			b = append(b, ": "...)
			for len(v) > 0 && isBlank(v[0]) {
				v = v[1:]
			}
			for len(v) > 0 && isBlank(v[len(v)-1]) {
				v = v[:len(v)-1]
			}
			start := len(b)
			b = append(b, v...)
			for i := start; i < len(b); i++ {
				if b[i] == '\r' || b[i] == '\n' {
					b[i] = ' '
				}
			}
			b = append(b, "\r\n"...)
		}
	}
	return b
}

// isBlank reports whether c is blank in a header value written out: a
// space or tab, or a CR or LF (which become spaces).
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
