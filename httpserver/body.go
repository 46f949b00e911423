package httpserver

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"time"
)

// source is where a request body's bytes come from: a connection's input
// (conn), or bytes in a test.
type source interface {
	// buffered is the input read and not consumed yet; it is valid until
	// the next call of more.
	buffered() []byte
	consume(n int)
	// more waits until more input is buffered, or returns why none will
	// come (io.EOF at the end of the input). A non-zero dead bounds the
	// wait: past it the input fails with a timeout.
	more(dead time.Time) error
}

// Bounds of a chunked body's framing (net/http's): the length of a chunk
// line, of the trailer, and of the framing beside the data.
const (
	maxChunkLineBytes = 4096
	maxTrailerBytes   = 4096
	maxExcessBytes    = 16 << 10
)

var (
	errChunkLineTooLong = errors.New("httpserver: chunk line too long")
	errChunkMalformed   = errors.New("httpserver: malformed chunked encoding")
	errChunkExcess      = errors.New("httpserver: chunked encoding contains too much non-data")
	errTrailer          = errors.New("httpserver: malformed trailer after chunked body")
	errBodyDone         = errors.New("httpserver: body read after the handler returned")
)

// chunk states
const (
	chunkLine  = iota // expecting a chunk-size line
	chunkData         // in a chunk's data
	chunkCRLF         // expecting the CRLF after a chunk's data
	chunkTrail        // in the trailer, after the last chunk
)

// body is a request's body: Content-Length bytes, or chunked (chunk
// extensions and trailer fields read and dropped). Reads are serialized;
// after the handler returns they fail.
type body struct {
	mu      sync.Mutex
	src     source
	chunked bool
	state   int
	left    int64 // bytes left: of the body, or of the current chunk
	excess  int64 // chunked: framing bytes beyond what the data allows
	trailer int   // chunked: trailer bytes so far
	err     error // sticky: io.EOF at the end, or why the body broke
	closed  bool  // the handler returned: its reads fail
	// cont, when set, is called before the first read: it sends the
	// client the 100 Continue it waits for.
	cont func()
	// The body's read deadline (Server.BodyReadTimeout, MinBodyRate):
	// from start, the first wait for its bytes, timeout plus one second
	// per rate bytes taken (got). No timeout: no deadline.
	timeout time.Duration
	rate    int64
	start   time.Time
	got     int64
}

// deadline is the bound of the body's next wait for input: timeout after
// the first wait, plus the time its bytes so far took at the minimum
// rate, so that a body that keeps coming at the rate is never cut, and
// one that trickles is.
func (b *body) deadline() time.Time {
	if b.timeout <= 0 {
		return time.Time{}
	}
	if b.start.IsZero() {
		b.start = time.Now()
	}
	d := b.start.Add(b.timeout)
	if b.rate > 0 {
		d = d.Add(time.Duration(float64(b.got) / float64(b.rate) * float64(time.Second)))
	}
	return d
}

// take consumes n bytes of the source for the body.
func (b *body) take(n int) {
	b.src.consume(n)
	b.got += int64(n)
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errBodyDone
	}
	if b.cont != nil {
		b.cont()
		b.cont = nil
	}
	return b.read(p)
}

// Close is a no-op: what the handler leaves of the body is the server's
// to read or not when the handler returns.
func (b *body) Close() error { return nil }

func (b *body) read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	var n int
	if b.chunked {
		n, b.err = b.readChunked(p)
	} else {
		n, b.err = b.readIdentity(p)
	}
	if b.err == io.EOF && n > 0 {
		return n, io.EOF
	}
	return n, b.err
}

// done reports whether the body was read to its end.
func (b *body) done() bool { return b.err == io.EOF }

func (b *body) readIdentity(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	buf := b.src.buffered()
	if len(buf) == 0 {
		if err := b.src.more(b.deadline()); err != nil {
			return 0, unexpected(err)
		}
		buf = b.src.buffered()
	}
	if int64(len(buf)) > b.left {
		buf = buf[:b.left]
	}
	n := copy(p, buf)
	b.take(n)
	b.left -= int64(n)
	if b.left == 0 {
		return n, io.EOF
	}
	return n, nil
}

// readChunked reads chunked data into p. Once it has some, it returns
// rather than wait for more input.
func (b *body) readChunked(p []byte) (n int, err error) {
	for {
		buf := b.src.buffered()
		switch b.state {
		case chunkLine:
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				if len(buf) >= maxChunkLineBytes {
					return n, errChunkLineTooLong
				}
				break
			}
			if i+1 > maxChunkLineBytes {
				return n, errChunkLineTooLong
			}
			size, err := chunkSize(buf[:i+1])
			if err != nil {
				return n, err
			}
			b.excess += int64(i+1) - 16 - 2*int64(size) // the line, the CRLF after the data
			b.excess = max(b.excess, 0)
			if b.excess > maxExcessBytes {
				return n, errChunkExcess
			}
			b.take(i + 1)
			if size == 0 {
				b.state = chunkTrail
			} else {
				b.state, b.left = chunkData, size
			}
			continue
		case chunkData:
			if len(p) == 0 {
				return n, nil
			}
			if len(buf) == 0 {
				break
			}
			if int64(len(buf)) > b.left {
				buf = buf[:b.left]
			}
			k := copy(p, buf)
			b.take(k)
			p, n, b.left = p[k:], n+k, b.left-int64(k)
			if b.left == 0 {
				b.state = chunkCRLF
			}
			continue
		case chunkCRLF:
			if len(buf) < 2 {
				break
			}
			if buf[0] != '\r' || buf[1] != '\n' {
				return n, errChunkMalformed
			}
			b.take(2)
			b.state = chunkLine
			continue
		case chunkTrail:
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				if b.trailer+len(buf) > maxTrailerBytes {
					return n, errTrailer
				}
				break
			}
			line := buf[:i+1]
			b.trailer += len(line)
			if b.trailer > maxTrailerBytes || !validTrailerLine(line) {
				return n, errTrailer
			}
			b.take(i + 1)
			if len(line) == 2 {
				return n, io.EOF
			}
			continue
		}
		// The buffered input ends within the framing or is empty.
		if n > 0 {
			return n, nil
		}
		if err := b.src.more(b.deadline()); err != nil {
			return n, unexpected(err)
		}
	}
}

// chunkSize parses a chunk-size line (its CRLF included): 1 to 16 hex
// digits, then an extension after ';' that is dropped. Only the final
// CRLF may hold a CR.
func chunkSize(line []byte) (int64, error) {
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return 0, errChunkMalformed
	}
	line = line[:len(line)-2]
	if bytes.IndexByte(line, '\r') >= 0 {
		return 0, errChunkMalformed
	}
	var size uint64
	i := 0
	for ; i < len(line) && line[i] != ';'; i++ {
		c := line[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, errChunkMalformed
		}
		if i == 15 && size>>59 != 0 || i == 16 {
			return 0, errChunkMalformed // past 2^63-1
		}
		size = size<<4 | uint64(d)
	}
	if i == 0 {
		return 0, errChunkMalformed
	}
	return int64(size), nil
}

// validTrailerLine reports whether line (its LF included) is the empty
// line that ends a trailer or a "name: value" field, ending in CRLF.
func validTrailerLine(line []byte) bool {
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return false
	}
	line = line[:len(line)-2]
	if len(line) == 0 {
		return true
	}
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return false
	}
	for _, c := range line[:colon] {
		if !tokenByte(c) {
			return false
		}
	}
	for _, c := range line[colon+1:] {
		if !valueByte(c) {
			return false
		}
	}
	return true
}

// unexpected is err, with io.EOF (the input ended within the body) as
// io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
