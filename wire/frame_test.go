package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"testing"
	"testing/iotest"
)

func streamOf(ms ...Message) []byte {
	var b []byte
	for _, m := range ms {
		b = AppendFrame(b, m)
	}
	return b
}

func streamMessages() []Message {
	return []Message{
		&Hello{Version: Version, EngineID: "d", Nonce: nonce(1)},
		&Renew{Seq: 1, Leases: []LeaseRef{{ID: 1, Token: tok(1)}}},
		&Block{ReadID: 1, Lease: 2, Tokens: 1, Digests: []uint64{9}, Data: bytes.Repeat([]byte{7}, 3000)},
		&AuthAck{Status: StatusOK},
		&Block{ReadID: 1, Lease: 2, Index: 1},
	}
}

func TestReadFrameStream(t *testing.T) {
	ms := streamMessages()
	stream := streamOf(ms...)
	for _, tc := range []struct {
		name string
		r    func() io.Reader
		buf  []byte
	}{
		{"whole", func() io.Reader { return bytes.NewReader(stream) }, nil},
		{"one byte at a time", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) }, nil},
		{"half reads", func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) }, make([]byte, 0, 8)},
		{"EOF with the data", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) }, make([]byte, 0, 1<<16)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r()
			buf := tc.buf
			for i, want := range ms {
				frame, err := ReadFrame(r, buf, 4096)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				got, err := Decode(frame)
				if err != nil {
					t.Fatalf("frame %d: Decode: %v", i, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("frame %d: got %#v, want %#v", i, got, want)
				}
				buf = frame[:0]
			}
			if _, err := ReadFrame(r, buf, 4096); err != io.EOF {
				t.Fatalf("after the last frame: %v, want io.EOF", err)
			}
		})
	}
}

func TestReadFrameReusesBuffer(t *testing.T) {
	stream := streamOf(&AuthAck{}, &AuthAck{Status: StatusBusy})
	buf := make([]byte, 0, 64)
	r := bytes.NewReader(stream)
	f1, err := ReadFrame(r, buf, 0)
	if err != nil || &f1[0] != &buf[:1][0] {
		t.Fatalf("first frame not read into buf: %v", err)
	}
	f2, err := ReadFrame(r, f1[:0], 0)
	if err != nil || &f2[0] != &buf[:1][0] {
		t.Fatalf("second frame not read into buf: %v", err)
	}
}

func TestReadFrameTruncated(t *testing.T) {
	stream := streamOf(streamMessages()[:3]...)
	for n := 1; n < len(stream); n++ {
		r := bytes.NewReader(stream[:n])
		var err error
		for err == nil {
			_, err = ReadFrame(r, nil, 0)
		}
		boundary := false
		for _, b := range frameEnds(stream) {
			boundary = boundary || b == n
		}
		if boundary {
			if err != io.EOF {
				t.Fatalf("stream cut at frame end %d: %v, want io.EOF", n, err)
			}
			continue
		}
		if !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("stream cut at %d of %d: %v, want ErrTruncated and io.ErrUnexpectedEOF", n, len(stream), err)
		}
	}
}

func frameEnds(stream []byte) []int {
	var ends []int
	for off := 0; off < len(stream); {
		off += 5 + int(binary.BigEndian.Uint32(stream[off:]))
		ends = append(ends, off)
	}
	return ends
}

func TestReadFrameLimit(t *testing.T) {
	m := &Block{Data: make([]byte, 100)}
	frame := AppendFrame(nil, m)
	payload := len(frame) - 5
	if _, err := ReadFrame(bytes.NewReader(frame), nil, payload); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader(frame), nil, payload-1); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("over the limit: %v, want ErrFrameTooLarge", err)
	}
	// A max of zero, or above MaxFrameBytes, means MaxFrameBytes.
	for _, maxPayload := range []int{0, -1, MaxFrameBytes + 1, math.MaxInt} {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], MaxFrameBytes+1)
		if _, err := ReadFrame(bytes.NewReader(hdr[:]), nil, maxPayload); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatalf("max %d, prefix MaxFrameBytes+1: %v, want ErrFrameTooLarge", maxPayload, err)
		}
		binary.BigEndian.PutUint32(hdr[:], MaxFrameBytes)
		if _, err := ReadFrame(bytes.NewReader(hdr[:]), nil, maxPayload); !errors.Is(err, ErrTruncated) {
			t.Fatalf("max %d, prefix MaxFrameBytes: %v, want ErrTruncated (accepted, then short)", maxPayload, err)
		}
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 0xffffffff)
	if _, err := ReadFrame(bytes.NewReader(hdr[:]), nil, 0); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("prefix 2^32-1: %v", err)
	}
}

// TestReadFrameLargeFrame reads a frame bigger than the growth chunk into a
// small buffer.
func TestReadFrameLargeFrame(t *testing.T) {
	data := make([]byte, 3*readChunkBytes+17)
	for i := range data {
		data[i] = byte(i * 31)
	}
	m := &Block{Lease: 5, Data: data}
	frame, err := ReadFrame(iotest.HalfReader(bytes.NewReader(AppendFrame(nil, m))), make([]byte, 0, 10), 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(frame)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("large frame: %v", err)
	}
}

func TestReadFrameReaderError(t *testing.T) {
	boom := errors.New("boom")
	if _, err := ReadFrame(iotest.ErrReader(boom), nil, 0); err != boom {
		t.Fatalf("got %v, want the reader's error", err)
	}
	stream := streamOf(&AuthAck{})
	r := io.MultiReader(bytes.NewReader(stream[:5]), iotest.ErrReader(boom))
	if _, err := ReadFrame(r, nil, 0); err != boom {
		t.Fatalf("mid-frame: got %v, want the reader's error", err)
	}
}
