package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// maxEventBytes bounds one server-sent event (all its data lines): a
// larger one is a broken or hostile stream, not a token.
const maxEventBytes = 4 << 20

// errEventTooLarge reports an event over maxEventBytes.
var errEventTooLarge = errors.New("bench: server-sent event too large")

// sseReader reads the data of server-sent events as the HTML standard
// defines them, which is more than OpenAI-compatible servers send: lines end
// in "\n", "\r\n" or "\r"; an event is the data lines up to a blank line,
// joined with "\n"; "data:" may or may not be followed by one space;
// comments (":...") and the fields event, id and retry are ignored; an
// event without data lines is skipped. The last event is dispatched even
// when the stream ends without a blank line after it.
//
// Not safe for concurrent use.
type sseReader struct {
	r       *bufio.Reader
	data    []byte
	hasData bool
	lastCR  bool // the previous line ended in "\r": a following "\n" is part of it
	line    []byte
	err     error
}

// sseReaders are readers released after their stream: a 16 KiB buffer
// per request was most of a streaming request's allocations.
var sseReaders sync.Pool

// maxPooledSSEBytes bounds the data and line buffers of a reader put back
// in sseReaders.
const maxPooledSSEBytes = 64 << 10

func newSSEReader(r io.Reader) *sseReader {
	if s, ok := sseReaders.Get().(*sseReader); ok {
		s.r.Reset(r)
		return s
	}
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// release puts s back for another stream. Neither s nor a slice it
// returned may be used after.
func (s *sseReader) release() {
	if cap(s.data) > maxPooledSSEBytes || cap(s.line) > maxPooledSSEBytes {
		return
	}
	s.r.Reset(nil)
	*s = sseReader{r: s.r, data: s.data[:0], line: s.line[:0]}
	sseReaders.Put(s)
}

// Next returns the data of the next event. The slice is valid until the
// next call. At the end of the stream it returns io.EOF; a read error or
// an oversized event is returned as is, and every later call returns it
// again.
func (s *sseReader) Next() ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.data, s.hasData = s.data[:0], false
	for {
		line, err := s.readLine()
		if err != nil {
			s.err = err
			if err == io.EOF && s.hasData {
				return s.data, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			if s.hasData {
				return s.data, nil
			}
			continue
		}
		name, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		if string(name) != "data" {
			continue // a comment (empty name) or a field we do not use
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > maxEventBytes {
			s.err = errEventTooLarge
			return nil, s.err
		}
		s.data = append(s.data, value...)
		s.hasData = true
	}
}

// readLine returns the next line without its terminator. The slice is
// valid until the next read. A line longer than maxEventBytes is an error.
// A last line without terminator is returned; then io.EOF. It scans the
// buffered bytes for a terminator at once rather than byte by byte.
func (s *sseReader) readLine() ([]byte, error) {
	line := s.line[:0]
	defer func() { s.line = line[:0] }()
	for {
		if _, err := s.r.Peek(1); err != nil {
			if err == io.EOF && len(line) > 0 {
				return line, nil
			}
			return nil, err
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		if s.lastCR {
			s.lastCR = false
			if buf[0] == '\n' {
				_, _ = s.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexByte(buf, '\n')
		end := i
		if end < 0 {
			end = len(buf)
		}
		if j := bytes.IndexByte(buf[:end], '\r'); j >= 0 {
			i = j
		}
		if i < 0 {
			if len(line)+len(buf) > maxEventBytes {
				return nil, fmt.Errorf("%w: a line exceeds %d bytes", errEventTooLarge, maxEventBytes)
			}
			line = append(line, buf...)
			_, _ = s.r.Discard(len(buf))
			continue
		}
		if len(line)+i > maxEventBytes {
			return nil, fmt.Errorf("%w: a line exceeds %d bytes", errEventTooLarge, maxEventBytes)
		}
		line = append(line, buf[:i]...)
		s.lastCR = buf[i] == '\r'
		_, _ = s.r.Discard(i + 1)
		return line, nil
	}
}
