package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Frames after the handshake are sealed: each is encrypted and
// authenticated with AES-256-GCM under a key of its direction, derived
// from the cluster secret and the handshake's two nonces and engine ids
// (DeriveSessionKeys), with the frame's sequence number in its direction
// as the nonce. A sealed frame is
//
//	[4-byte length L][L+1 bytes: type and payload, encrypted][16-byte tag]
//
// where L is the payload's length, as in a plain frame (so every cap on
// payloads holds unchanged), and the length prefix is authenticated with
// the rest. A frame that was altered, injected, dropped, replayed or
// reordered fails to open. The handshake's own frames (HELLO, HELLO_ACK,
// AUTH, AUTH_ACK) are plain: D seals from the frame after its AUTH, P from
// the frame after its AUTH_ACK with StatusOK.

// SealOverhead is the bytes a sealed frame has beyond a plain one: the tag.
const SealOverhead = 16

// sessionLabel separates the session keys from every other use of the
// cluster secret.
const sessionLabel = "kvlease/wire/v2 session keys\x00"

// SessionKeys are a session's two keys, one per direction.
type SessionKeys struct {
	PToD, DToP [32]byte
}

// ErrUnsealed is wrapped by Opener.Open's errors: the frame was not sealed
// by the peer's Sealer in this position (altered, injected, replayed or
// reordered), or with another key.
var ErrUnsealed = errors.New("wire: frame authentication failed")

// DeriveSessionKeys returns the keys of the session whose HELLO carried
// dNonce and D's id and whose HELLO_ACK carried pNonce and P's id:
// HKDF-SHA256 of the cluster secret, salted by both nonces, with the
// engine ids (each prefixed by its length) in its info. Both ends compute
// the same keys; nobody without the secret can.
func DeriveSessionKeys(secret []byte, dNonce, pNonce [16]byte, pEngineID, dEngineID string) SessionKeys {
	salt := append(dNonce[:], pNonce[:]...)
	info := []byte(sessionLabel)
	info = binary.BigEndian.AppendUint32(info, uint32(len(pEngineID)))
	info = append(info, pEngineID...)
	info = binary.BigEndian.AppendUint32(info, uint32(len(dEngineID)))
	info = append(info, dEngineID...)
	okm, err := hkdf.Key(sha256.New, secret, salt, string(info), 64)
	if err != nil {
		panic(fmt.Sprintf("wire: HKDF: %v", err)) // 64 bytes of SHA-256 cannot fail
	}
	var k SessionKeys
	copy(k.PToD[:], okm[:32])
	copy(k.DToP[:], okm[32:])
	return k
}

// Sealer seals the frames of one direction in order. Next reserves
// sequence numbers and must have one owner (the writer); SealSeq may run
// concurrently for distinct reserved numbers, so that several frames are
// sealed at once while the writer writes the ones before them.
type Sealer struct {
	aead cipher.AEAD
	seq  uint64
}

// Opener opens the frames of one direction in order. Next reserves
// sequence numbers and must have one owner (the reader); OpenSeq may run
// concurrently for distinct reserved numbers.
type Opener struct {
	aead cipher.AEAD
	seq  uint64
}

func newAEAD(key [32]byte) cipher.AEAD {
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(fmt.Sprintf("wire: AES: %v", err)) // a 32-byte key cannot fail
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(fmt.Sprintf("wire: GCM: %v", err))
	}
	return aead
}

// NewSealer returns the sealer of the direction of key.
func NewSealer(key [32]byte) *Sealer { return &Sealer{aead: newAEAD(key)} }

// NewOpener returns the opener of the direction of key.
func NewOpener(key [32]byte) *Opener { return &Opener{aead: newAEAD(key)} }

func nonceOf(seq uint64) (n [12]byte) {
	binary.BigEndian.PutUint64(n[4:], seq)
	return n
}

// Next reserves the sequence number of the direction's next frame: each
// number is handed out once, so no nonce is ever used twice under a key.
func (s *Sealer) Next() uint64 {
	n := s.seq
	s.seq++
	return n
}

// Seal seals the plain frame (its 4-byte length prefix included) in
// place as the direction's next frame and returns it with its tag:
// frame's capacity should leave SealOverhead bytes after it, or the
// result is a new slice.
func (s *Sealer) Seal(frame []byte) []byte { return s.SealSeq(frame, s.Next()) }

// SealSeq is Seal as frame number seq, a number from Next, sealed once.
func (s *Sealer) SealSeq(frame []byte, seq uint64) []byte {
	if len(frame) < 5 {
		panic("wire: Seal of a frame without a type byte")
	}
	if cap(frame)-len(frame) < SealOverhead {
		frame = append(frame, make([]byte, SealOverhead)...)[:len(frame)]
	}
	n := nonceOf(seq)
	out := s.aead.Seal(frame[4:4], n[:], frame[4:], frame[:4])
	return frame[:4+len(out)]
}

// Next reserves the sequence number of the next frame read.
func (o *Opener) Next() uint64 {
	n := o.seq
	o.seq++
	return n
}

// Open opens a sealed frame read with ReadSealedFrame (its length prefix
// included, as read), in place, as the direction's next frame and returns
// the plain frame without its prefix (type byte and payload), ready for
// Decode. An error wraps ErrUnsealed; the stream cannot go on after it.
func (o *Opener) Open(sealed []byte) ([]byte, error) { return o.OpenSeq(sealed, o.Next()) }

// OpenSeq is Open as frame number seq, a number from Next.
func (o *Opener) OpenSeq(sealed []byte, seq uint64) ([]byte, error) {
	if len(sealed) < 4+1+SealOverhead {
		return nil, fmt.Errorf("%w: %d bytes, shorter than a sealed frame", ErrUnsealed, len(sealed))
	}
	n := nonceOf(seq)
	plain, err := o.aead.Open(sealed[4:4], n[:], sealed[4:], sealed[:4])
	if err != nil {
		return nil, fmt.Errorf("%w: frame %d of the session does not verify", ErrUnsealed, seq)
	}
	return plain, nil
}
