package kvblock

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	d := make([]uint64, 100)
	for i := range d {
		d[i] = rng.Uint64()
	}
	c := Checksum(d)
	if c != Checksum(slices.Clone(d)) {
		t.Fatal("not deterministic")
	}
	for i := range d {
		e := slices.Clone(d)
		e[i] ^= 1 << (i % 64)
		if Checksum(e) == c {
			t.Fatalf("flipping a bit of digest %d does not change the checksum", i)
		}
	}
	if Checksum(d[:99]) == c || Checksum(nil) == c {
		t.Fatal("length does not matter")
	}
	if a := testing.AllocsPerRun(10, func() { Checksum(d) }); a != 0 {
		t.Fatalf("Checksum allocates %v", a)
	}
	// The wire format: xxhash64 of the digests as little-endian bytes.
	raw := make([]byte, 0, 24)
	for _, v := range d[:3] {
		for k := 0; k < 8; k++ {
			raw = append(raw, byte(v>>(8*k)))
		}
	}
	if Checksum(d[:3]) != SlotDigest(raw) {
		t.Fatal("Checksum is not xxhash64 of little-endian digests")
	}
}

func BenchmarkChecksum(b *testing.B) {
	d := make([]uint64, 16)
	b.SetBytes(16 * 8)
	b.ReportAllocs()
	for b.Loop() {
		Checksum(d)
	}
}
