package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// errEventTooLong is returned when one line of an event stream is over the
// configured bound.
var errEventTooLong = errors.New("proxy: event stream line too long")

// eventReader reads a text/event-stream one event at a time: the lines up
// to and including the blank line that ends an event. Lines are kept
// verbatim, so events pass through unchanged unless the proxy edits them.
type eventReader struct {
	br      *bufio.Reader
	maxLine int
	buf     []byte
}

// readers recycles the 16 KiB buffers of event readers: one per stream
// otherwise dominates what a streamed request allocates.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// newEventReader returns a reader of r's events; call release when done.
func newEventReader(r io.Reader, maxLine int) *eventReader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return &eventReader{br: br, maxLine: maxLine}
}

// release returns the reader's buffer to the pool; e must not be used
// after.
func (e *eventReader) release() {
	e.br.Reset(nil)
	readers.Put(e.br)
	e.br = nil
}

// next returns the next event's bytes, valid until the following call. At
// the end of the stream it returns what is left (possibly an unterminated
// event) with io.EOF; an error of the underlying reader is returned as is.
func (e *eventReader) next() ([]byte, error) {
	e.buf = e.buf[:0]
	lineStart := 0
	for {
		frag, err := e.br.ReadSlice('\n')
		e.buf = append(e.buf, frag...)
		if len(e.buf)-lineStart > e.maxLine {
			return nil, fmt.Errorf("%w: over %d bytes", errEventTooLong, e.maxLine)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			return e.buf, err
		}
		line := e.buf[lineStart:]
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			if lineStart == 0 { // stray blank line between events
				e.buf = e.buf[:0]
				continue
			}
			return e.buf, nil
		}
		lineStart = len(e.buf)
	}
}

// ready reports whether a whole event is buffered: the next call of next
// returns it without reading. Its lines are complete, so a stream cut
// after them still ends it (next returns it with the error).
func (e *eventReader) ready() bool {
	b, _ := e.br.Peek(e.br.Buffered())
	content := false
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		if len(bytes.TrimRight(b[:i], "\r")) == 0 {
			if content {
				return true
			}
		} else {
			content = true
		}
		b = b[i+1:]
	}
}

var (
	dataPrefix = []byte("data:")
	doneData   = []byte("[DONE]")
	usageKey   = []byte(`"usage"`)
)

// eventData returns the payload of an event's data line (one data line per
// event, as OpenAI-style servers write), or nil.
func eventData(ev []byte) []byte {
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		if d, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), dataPrefix); ok {
			return bytes.TrimSpace(d)
		}
	}
	return nil
}

// rewriteUsageEvent returns ev with usage.prompt_tokens_details.cached_tokens
// set to n when its data is a JSON object with a usage object; otherwise
// ev unchanged.
func rewriteUsageEvent(ev []byte, n int64) []byte {
	data := eventData(ev)
	if data == nil || !bytes.Contains(data, usageKey) {
		return ev
	}
	out, ok := withCachedTokens(data, n)
	if !ok {
		return ev
	}
	ev2 := make([]byte, 0, len(out)+8)
	ev2 = append(ev2, "data: "...)
	ev2 = append(ev2, out...)
	return append(ev2, "\n\n"...)
}
