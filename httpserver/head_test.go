package httpserver

import (
	"bufio"
	"bytes"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"testing"
	"time"
)

// pieces is a source that hands out its bytes step at a time, as a
// connection that delivers them in small reads.
type pieces struct {
	data []byte
	buf  []byte
	r    int
	step int
}

func (p *pieces) buffered() []byte { return p.buf[p.r:] }
func (p *pieces) consume(n int)    { p.r += n }
func (p *pieces) more(time.Time) error {
	if len(p.data) == 0 {
		return io.EOF
	}
	n := min(p.step, len(p.data))
	p.buf = append(p.buf[p.r:], p.data[:n]...)
	p.r, p.data = 0, p.data[n:]
	return nil
}

// readRequest reads one request from src as a connection does: its head,
// then its body whole.
func readRequest(src *pieces) (h head, hdr http.Header, u url.URL, b []byte, headErr, bodyErr error) {
	hdr = make(http.Header)
	var scan headScan
	var text string
	for {
		buf := src.buffered()
		if scan.line == 0 {
			if e := checkStart(buf[:min(len(buf), maxMethodBytes+1)]); e != nil {
				return h, hdr, u, nil, e, nil
			}
		}
		end := scan.end(buf)
		if end >= 0 {
			text = string(buf[:end])
			src.consume(end)
			break
		}
		if err := src.more(time.Time{}); err != nil {
			return h, hdr, u, nil, err, nil
		}
	}
	if _, se := parseHead(text, &h, hdr, nil); se != nil {
		return h, hdr, u, nil, se, nil
	}
	if err := parseURI(h.uri, &u); err != nil {
		return h, hdr, u, nil, err, nil
	}
	bd := &body{src: src, chunked: h.chunked, left: h.contentLength}
	if !h.chunked && h.contentLength == 0 {
		bd.err = io.EOF
	}
	b, bodyErr = io.ReadAll(bd)
	return h, hdr, u, b, nil, bodyErr
}

var headSeeds = []string{
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /v1/models?x=1&y=%20 HTTP/1.1\r\nHost: a:80\r\nUser-Agent: t\r\naccept: */*\r\n\r\n",
	"POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	"GET http://example.com/x?y HTTP/1.1\r\nHost: other\r\n\r\n",
	"GET /a/../b//c;d HTTP/1.1\nHost: a\n\n",
	"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
	"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
	"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
	"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
	"GET / HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
}

// FuzzHead holds the request reader to net/http's: what it accepts,
// http.ReadRequest reads the same (method, target, header, framing and
// body); what http.ReadRequest refuses, it refuses.
func FuzzHead(f *testing.F) {
	for _, s := range headSeeds {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		std, stdErr := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
		var stdBody []byte
		var stdBodyErr error
		if stdErr == nil {
			stdBody, stdBodyErr = io.ReadAll(std.Body)
		}
		h, hdr, u, b, headErr, bodyErr := readRequest(&pieces{data: data, step: int(step) + 1})
		if headErr != nil {
			return // refusing more than net/http is allowed
		}
		if stdErr != nil {
			t.Fatalf("accepted a head net/http refuses (%v): %q", stdErr, data)
		}
		if h.method != std.Method || h.uri != std.RequestURI || h.proto != std.Proto || h.minor != std.ProtoMinor {
			t.Fatalf("request line %q %q %q, net/http %q %q %q", h.method, h.uri, h.proto, std.Method, std.RequestURI, std.Proto)
		}
		if !reflect.DeepEqual(&u, std.URL) {
			t.Fatalf("URL %#v, net/http %#v", u, *std.URL)
		}
		host := h.host
		if std.URL.Host != "" {
			host = std.URL.Host
		}
		if host != std.Host {
			t.Fatalf("host %q, net/http %q", host, std.Host)
		}
		want := maps.Clone(std.Header)
		delete(want, "Host")
		if !reflect.DeepEqual(hdr, want) && !(len(hdr) == 0 && len(want) == 0) {
			t.Fatalf("header %q, net/http %q", hdr, want)
		}
		if h.contentLength != std.ContentLength || h.close != std.Close || h.chunked != (len(std.TransferEncoding) > 0) {
			t.Fatalf("framing %d close %v chunked %v, net/http %d %v %q", h.contentLength, h.close, h.chunked, std.ContentLength, std.Close, std.TransferEncoding)
		}
		if bodyErr == nil {
			if stdBodyErr != nil {
				t.Fatalf("read a body net/http refuses (%v): %q", stdBodyErr, data)
			}
			if !bytes.Equal(b, stdBody) {
				t.Fatalf("body %q, net/http %q", b, stdBody)
			}
		} else if stdBodyErr == nil && bodyErr != errTrailer && bodyErr != errChunkExcess {
			// Refusing a body is allowed, but check that it is a framing
			// error and not a misreading.
			if !bytes.HasPrefix(stdBody, b) {
				t.Fatalf("body %q before %v, net/http read %q", b, bodyErr, stdBody)
			}
		}
	})
}

// TestHeadRefusals checks the answer to each refused head.
func TestHeadRefusals(t *testing.T) {
	for _, tc := range []struct {
		head string
		code int
	}{
		{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", 400},
		{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
		{"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
		{"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n", 417},
		{"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
		{"GET / HTTP/1.x\r\nHost: a\r\n\r\n", 400},
		{"GET /\r\n\r\n", 400},
		{"CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", 405},
	} {
		var h head
		_, se := parseHead(tc.head, &h, make(http.Header), nil)
		if se == nil || se.code != tc.code {
			t.Errorf("%q: refused with %v, want %d", tc.head, se, tc.code)
		}
	}
}

// TestCheckStart checks that what cannot start a request line is refused
// from its first bytes, before any line end.
func TestCheckStart(t *testing.T) {
	for _, tc := range []struct {
		start string
		ok    bool
	}{
		{"GET", true}, {"GET /x", true}, {"POST ", true},
		{"\x16\x03\x01", false}, {" GET", false}, {"GE\x00", false},
		{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", false},
	} {
		if got := checkStart([]byte(tc.start)) == nil; got != tc.ok {
			t.Errorf("checkStart(%q) ok %v, want %v", tc.start, got, tc.ok)
		}
	}
}

// TestChunkedBounds checks the bounds of a chunked body's framing.
func TestChunkedBounds(t *testing.T) {
	long := bytes.Repeat([]byte("a"), maxChunkLineBytes)
	for _, tc := range []struct {
		name string
		in   string
		want error
	}{
		{"line too long", "1;" + string(long) + "\r\n", errChunkLineTooLong},
		{"size past 2^63", "8000000000000000\r\n", errChunkMalformed},
		{"bare LF", "1\nx\r\n0\r\n\r\n", errChunkMalformed},
		{"no CRLF after data", "1\r\nxyz", errChunkMalformed},
		{"trailer too long", "0\r\nX: " + string(long) + "\r\n\r\n", errTrailer},
		{"bad trailer", "0\r\nno colon\r\n\r\n", errTrailer},
		{"cut short", "5\r\nab", io.ErrUnexpectedEOF},
		{"excess", string(bytes.Repeat([]byte("1;aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\nx\r\n"), 1000)), errChunkExcess},
	} {
		b := &body{src: &pieces{data: []byte(tc.in), step: 7}, chunked: true}
		if _, err := io.ReadAll(b); err != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}
