package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// readChunkBytes is how much ReadFrame grows its buffer ahead of the bytes
// that actually arrived. A peer announcing a large frame must send the bytes
// to make ReadFrame allocate them: a length prefix alone buys at most this.
const readChunkBytes = 1 << 20

// ReadFrame reads one length-prefixed frame from r and returns it without the
// prefix (type byte + payload), ready for Decode.
//
// The frame is read into buf, which is grown when too small; the result
// aliases buf (or the grown buffer), so a caller that loops passes the
// previous result back as buf (ReadFrame(r, frame[:0], max) works: only the
// capacity is used) and must be done with a frame, including a Block's Data,
// before the next call.
//
// maxPayload bounds the payload length; a prefix above it fails with
// ErrFrameTooLarge before any payload is read, and the stream is then out of
// sync: close it. A maxPayload ≤ 0 or above MaxFrameBytes means MaxFrameBytes.
//
// Errors: io.EOF if r ends cleanly before a frame starts; an error matching
// both ErrTruncated and io.ErrUnexpectedEOF if it ends inside a frame; r's
// own error otherwise. Short reads are fine: ReadFrame reads until the frame
// is complete.
func ReadFrame(r io.Reader, buf []byte, maxPayload int) (frame []byte, err error) {
	return readFrame(r, buf, maxPayload, false)
}

// ReadSealedFrame reads one sealed frame (see Sealer) as ReadFrame reads a
// plain one, bounds and errors alike, and returns it whole, its length
// prefix and tag included, for Opener.Open.
func ReadSealedFrame(r io.Reader, buf []byte, maxPayload int) (frame []byte, err error) {
	return readFrame(r, buf, maxPayload, true)
}

func readFrame(r io.Reader, buf []byte, maxPayload int, sealed bool) (frame []byte, err error) {
	if maxPayload <= 0 || maxPayload > MaxFrameBytes {
		maxPayload = MaxFrameBytes
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, readErr(err, false)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(maxPayload) {
		return nil, fmt.Errorf("%w: payload of %d bytes, limit %d", ErrFrameTooLarge, n, maxPayload)
	}
	need := int(n) + 1 // the type byte
	frame = buf[:0]
	if sealed {
		need += 4 + SealOverhead // kept: the prefix is authenticated
		frame = append(frame, hdr[:]...)
	}
	if cap(frame) >= need {
		start := len(frame)
		frame = frame[:need]
		if _, err := io.ReadFull(r, frame[start:]); err != nil {
			return nil, readErr(err, true)
		}
		return frame, nil
	}
	// Grow as the bytes arrive, not as the prefix promises.
	for len(frame) < need {
		if len(frame) == cap(frame) {
			grown := min(need, max(2*cap(frame), readChunkBytes))
			next := make([]byte, len(frame), grown)
			copy(next, frame)
			frame = next
		}
		start := len(frame)
		frame = frame[:min(need, cap(frame))]
		if _, err := io.ReadFull(r, frame[start:]); err != nil {
			return nil, readErr(err, true)
		}
	}
	return frame, nil
}

// readErr maps the errors of io.ReadFull: EOF before the first byte of a
// frame is a clean end of stream; EOF anywhere inside one is a truncation.
func readErr(err error, insideFrame bool) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || (insideFrame && errors.Is(err, io.EOF)) {
		return fmt.Errorf("%w: stream ended inside a frame: %w", ErrTruncated, io.ErrUnexpectedEOF)
	}
	return err
}
