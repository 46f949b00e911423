package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
)

// maxAnswerHead bounds an answer's head (status line and headers); a
// line must also fit the connection's read buffer.
const maxAnswerHead = 64 << 10

// errBadAnswer is an answer head the legs' client cannot read.
var errBadAnswer = errors.New("proxy: malformed answer from the engine")

// answerHead is what readAnswerHead reads of an answer's head.
type answerHead struct {
	status      int
	statusLine  []byte   // "503 Service Unavailable": an unsuccessful status and its reason
	contentType []string // the Content-Type as a header value, nil when absent
	knownType   int      // its index in knownContentTypes, -1 when another, len(knownContentTypes) when absent
	retryAfter  string
	length      int64 // the Content-Length, -1 when none
	chunked     bool
	close       bool // the connection ends after it (the engine closes it, or the body ends with it)
}

// readAnswerHead reads one answer's head from br as http.ReadResponse
// would for a leg: a status line of HTTP/1.x, headers (names are
// case-insensitive, values trimmed), a Content-Length (several must
// agree), Transfer-Encoding: chunked (which overrides a Content-Length;
// another coding is refused), and whether the connection closes after it
// (Connection: close, or HTTP/1.0 without keep-alive). Of the other
// headers only Content-Type and Retry-After are kept: the proxy passes no
// other on. It allocates nothing for the usual JSON and event-stream
// Content-Types (their header values and maps are shared).
func readAnswerHead(br *bufio.Reader) (answerHead, error) {
	h := answerHead{length: -1, knownType: len(knownContentTypes)}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return h, headError(err)
	}
	size := len(line)
	line = trimEOL(line)
	// "HTTP/1.1 200 OK": the version, a space, three digits.
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || (line[7] != '0' && line[7] != '1') || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return h, fmt.Errorf("%w: status line %q", errBadAnswer, clip(line))
	}
	http10 := line[7] == '0'
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return h, fmt.Errorf("%w: status line %q", errBadAnswer, clip(line))
		}
		h.status = h.status*10 + int(c-'0')
	}
	if h.status < 100 {
		return h, fmt.Errorf("%w: status line %q", errBadAnswer, clip(line))
	}
	if !isSuccess(h.status) {
		// Kept for Response.Status (error messages quote it): a copy,
		// as the next read reuses the buffer.
		h.statusLine = bytes.Clone(line[9:])
	}
	keepAlive := false
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return h, headError(err)
		}
		if size += len(line); size > maxAnswerHead {
			return h, fmt.Errorf("%w: a head over %d bytes", errBadAnswer, maxAnswerHead)
		}
		line = trimEOL(line)
		if len(line) == 0 {
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validHeaderName(line[:colon]) {
			return h, fmt.Errorf("%w: header line %q", errBadAnswer, clip(line))
		}
		name, value := line[:colon], bytes.Trim(line[colon+1:], " \t")
		if !validHeaderValue(value) {
			return h, fmt.Errorf("%w: header line %q", errBadAnswer, clip(line))
		}
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.ParseUint(string(value), 10, 63)
			if err != nil || len(value) == 0 || value[0] == '+' {
				return h, fmt.Errorf("%w: Content-Length %q", errBadAnswer, clip(value))
			}
			if h.length >= 0 && h.length != int64(n) {
				return h, fmt.Errorf("%w: two different Content-Lengths", errBadAnswer)
			}
			h.length = int64(n)
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if !bytes.EqualFold(value, []byte("chunked")) || h.chunked {
				return h, fmt.Errorf("%w: Transfer-Encoding %q", errBadAnswer, clip(value))
			}
			h.chunked = true
		case bytes.EqualFold(name, []byte("Connection")):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.Trim(tok, " \t")
				switch {
				case bytes.EqualFold(tok, []byte("close")):
					h.close = true
				case bytes.EqualFold(tok, []byte("keep-alive")):
					keepAlive = true
				}
			}
		case bytes.EqualFold(name, []byte("Content-Type")):
			if h.contentType == nil {
				h.setContentType(value)
			}
		case bytes.EqualFold(name, []byte("Retry-After")):
			if h.retryAfter == "" {
				h.retryAfter = string(value)
			}
		}
	}
	if http10 {
		h.close = h.close || !keepAlive
		h.chunked = false // HTTP/1.0 has no transfer codings: net/http ignores them
	}
	if h.chunked {
		h.length = -1
	}
	if h.status < 200 || h.status == http.StatusNoContent || h.status == http.StatusNotModified {
		h.length, h.chunked = 0, false
	}
	if h.length < 0 && !h.chunked {
		h.close = true // the body ends with the connection
	}
	return h, nil
}

func isSuccess(status int) bool { return status/100 == 2 }

// headError is the error of a head that stopped at err.
func headError(err error) error {
	if errors.Is(err, bufio.ErrBufferFull) {
		return fmt.Errorf("%w: a header line longer than the read buffer", errBadAnswer)
	}
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func trimEOL(line []byte) []byte {
	line = line[:len(line)-1] // '\n'
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line
}

// clip shortens a line quoted in an error.
func clip(b []byte) []byte { return b[:min(len(b), 80)] }

// validHeaderName reports whether name is an HTTP token (RFC 9110, 5.6.2).
func validHeaderName(name []byte) bool {
	for _, c := range name {
		if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), c) >= 0 {
			return false
		}
	}
	return true
}

// Content-Type values the engines send, and the answer headers of each,
// shared rather than allocated; the last has no Content-Type.
var (
	knownContentTypes = []string{"application/json", "text/event-stream", "text/event-stream; charset=utf-8",
		"application/json; charset=utf-8", "text/plain; charset=utf-8"}
	sharedHeaders = func() []http.Header {
		hs := make([]http.Header, len(knownContentTypes)+1)
		for i, ct := range knownContentTypes {
			hs[i] = http.Header{"Content-Type": {ct}}
		}
		hs[len(knownContentTypes)] = http.Header{}
		return hs
	}()
)

// setContentType sets h's Content-Type to v.
func (h *answerHead) setContentType(v []byte) {
	for i, k := range knownContentTypes {
		if string(v) == k {
			h.contentType, h.knownType = sharedHeaders[i]["Content-Type"], i
			return
		}
	}
	h.contentType, h.knownType = []string{string(v)}, -1
}

// fill makes resp h's answer with body body. Its Header is shared by
// every answer of the same Content-Type when there is no Retry-After:
// read it, never change it.
func (h *answerHead) fill(resp *http.Response, body io.ReadCloser) {
	var shared http.Header // set below when the type is not a known one
	if h.knownType >= 0 {
		shared = sharedHeaders[h.knownType]
	}
	*resp = http.Response{
		StatusCode:    h.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        shared,
		Body:          body,
		ContentLength: h.length,
		Close:         h.close,
	}
	switch {
	case h.statusLine != nil:
		resp.Status = string(h.statusLine)
	case h.status == http.StatusOK:
		resp.Status = "200 OK"
	default:
		resp.Status = strconv.Itoa(h.status) + " " + http.StatusText(h.status)
	}
	if h.knownType < 0 || h.retryAfter != "" {
		resp.Header = make(http.Header, 2)
		if h.contentType != nil {
			resp.Header["Content-Type"] = h.contentType
		}
		if h.retryAfter != "" {
			resp.Header["Retry-After"] = []string{h.retryAfter}
		}
	}
	if h.chunked {
		resp.TransferEncoding = chunkedCoding
	}
}

var chunkedCoding = []string{"chunked"}

// answerBody reads an answer's body from a connection's reader: length
// bytes, a chunked body (and its trailer), or up to the connection's end.
type answerBody struct {
	br      *bufio.Reader
	remain  int64     // bytes left of a Content-Length body; -1 otherwise
	chunked io.Reader // the chunked body's decoder, nil otherwise
	eof     bool
}

func newAnswerBody(br *bufio.Reader, h *answerHead) answerBody {
	b := answerBody{br: br, remain: h.length}
	if h.chunked {
		b.chunked = httputil.NewChunkedReader(br)
	}
	return b
}

func (b *answerBody) Read(p []byte) (int, error) {
	switch {
	case b.eof:
		return 0, io.EOF
	case b.chunked != nil:
		n, err := b.chunked.Read(p)
		if err == io.EOF {
			if err = b.readTrailer(); err == nil {
				b.eof = true
				err = io.EOF
			}
		}
		return n, err
	case b.remain == 0:
		b.eof = true
		return 0, io.EOF
	case b.remain > 0:
		if int64(len(p)) > b.remain {
			p = p[:b.remain]
		}
		n, err := b.br.Read(p)
		b.remain -= int64(n)
		switch {
		case b.remain == 0:
			b.eof = true
			return n, io.EOF
		case err == io.EOF:
			return n, io.ErrUnexpectedEOF
		}
		return n, err
	}
	n, err := b.br.Read(p) // to the connection's end
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// readTrailer reads the trailer after a chunked body's last chunk, up to
// its empty line, each line ended by CR LF as net/http requires (the
// proxy passes no trailer on).
func (b *answerBody) readTrailer() error {
	size := 0
	for {
		line, err := b.br.ReadSlice('\n')
		if err != nil {
			return headError(err)
		}
		if size += len(line); size > maxAnswerHead {
			return fmt.Errorf("%w: a trailer over %d bytes", errBadAnswer, maxAnswerHead)
		}
		if !bytes.HasSuffix(line, []byte("\r\n")) {
			return fmt.Errorf("%w: a trailer line not ended by CR LF", errBadAnswer)
		}
		if len(line) == 2 {
			return nil
		}
		line = trimEOL(line)
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !validHeaderName(line[:colon]) || !validHeaderValue(line[colon+1:]) {
			return fmt.Errorf("%w: trailer line %q", errBadAnswer, clip(line))
		}
	}
}
