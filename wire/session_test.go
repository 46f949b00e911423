package wire

import (
	"bytes"
	"errors"
	"testing"
)

// TestSealOpen: a sealed frame opens to itself, in order, under the
// direction's key; a flipped byte anywhere (length prefix, type, payload,
// tag), a replayed or reordered frame, the other direction's key, another
// secret or another session's nonces fail.
func TestSealOpen(t *testing.T) {
	secret := []byte("session test cluster secret")
	k := DeriveSessionKeys(secret, [16]byte{1}, [16]byte{2}, "p0", "d0")
	if k.PToD == k.DToP {
		t.Fatal("both directions have one key")
	}
	for _, other := range []SessionKeys{
		DeriveSessionKeys([]byte("another cluster secret"), [16]byte{1}, [16]byte{2}, "p0", "d0"),
		DeriveSessionKeys(secret, [16]byte{3}, [16]byte{2}, "p0", "d0"),
		DeriveSessionKeys(secret, [16]byte{1}, [16]byte{2}, "p0", "d1"),
		DeriveSessionKeys(secret, [16]byte{1}, [16]byte{2}, "p", "0d0"),
	} {
		if other.PToD == k.PToD {
			t.Errorf("keys do not depend on every input: %x", other.PToD)
		}
	}
	frames := []Message{
		&ReadEnd{ReadID: 1, Lease: 2, Status: StatusOK},
		&Block{ReadID: 1, Lease: 2, Tokens: 1, Digests: []uint64{9}, Data: bytes.Repeat([]byte{7}, 300)},
	}
	s, o := NewSealer(k.PToD), NewOpener(k.PToD)
	var sealed [][]byte
	for _, m := range frames {
		plain := AppendFrame(nil, m)
		sf := s.Seal(bytes.Clone(plain))
		if len(sf) != len(plain)+SealOverhead || bytes.Contains(sf, plain[5:]) {
			t.Fatalf("sealed %d bytes from %d, or the payload shows", len(sf), len(plain))
		}
		sealed = append(sealed, sf)
	}
	// Out of order, then a flipped byte at each position: refused.
	if _, err := NewOpener(k.PToD).Open(bytes.Clone(sealed[1])); !errors.Is(err, ErrUnsealed) {
		t.Errorf("the second frame opened first: %v", err)
	}
	for i := range sealed[0] {
		bad := bytes.Clone(sealed[0])
		bad[i] ^= 0x80
		if _, err := NewOpener(k.PToD).Open(bad); !errors.Is(err, ErrUnsealed) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, err := NewOpener(k.DToP).Open(bytes.Clone(sealed[0])); !errors.Is(err, ErrUnsealed) {
		t.Errorf("opened with the other direction's key: %v", err)
	}
	for i, sf := range sealed {
		plain, err := o.Open(bytes.Clone(sf))
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if want := AppendFrame(nil, frames[i])[4:]; !bytes.Equal(plain, want) {
			t.Fatalf("frame %d opened to %x", i, plain)
		}
	}
	if _, err := o.Open(bytes.Clone(sealed[1])); !errors.Is(err, ErrUnsealed) {
		t.Errorf("a replayed frame opened: %v", err)
	}
}

// BenchmarkSeal seals and opens a 2 MiB BLOCK frame (an 8B-class model's
// 16-token block): MB/s of one core for both ends' work.
func BenchmarkSeal(b *testing.B) {
	k := DeriveSessionKeys([]byte("benchmark cluster secret"), [16]byte{1}, [16]byte{2}, "p0", "d0")
	s, o := NewSealer(k.PToD), NewOpener(k.PToD)
	frame := AppendFrame(make([]byte, 0, 2<<20+256), &Block{ReadID: 1, Lease: 1, Tokens: 16, Digests: make([]uint64, 16), Data: make([]byte, 2<<20)})
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		sf := s.Seal(frame)
		if _, err := o.Open(sf); err != nil {
			b.Fatal(err)
		}
		frame = sf[:len(frame)] // opened in place: the plain frame again
	}
}

// FuzzOpen: whatever bytes come after the handshake, Open refuses them
// without panicking, unless they are the first frame a Sealer sealed
// with the session's key: then resealing what it opened gives them back.
func FuzzOpen(f *testing.F) {
	k := DeriveSessionKeys([]byte("fuzz cluster secret"), [16]byte{1}, [16]byte{2}, "p0", "d0")
	for _, m := range []Message{&ReadEnd{ReadID: 1, Lease: 2}, &Block{ReadID: 1, Lease: 2, Tokens: 1, Digests: []uint64{3}, Data: []byte("kv")}} {
		f.Add(NewSealer(k.PToD).Seal(AppendFrame(nil, m)))
	}
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		plain, err := NewOpener(k.PToD).Open(bytes.Clone(in))
		if err != nil {
			if !errors.Is(err, ErrUnsealed) {
				t.Fatalf("error %v does not wrap ErrUnsealed", err)
			}
			return
		}
		again := NewSealer(k.PToD).Seal(append(bytes.Clone(in[:4]), plain...))
		if !bytes.Equal(again, in) {
			t.Fatalf("opened %x, which seals to %x", in, again)
		}
	})
}
