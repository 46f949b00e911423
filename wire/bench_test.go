package wire

import (
	"testing"
)

// BenchmarkRenewCodec encodes and decodes a RENEW of 10,000 leases: one
// heartbeat of a D with 10,000 requests waiting on one P.
func BenchmarkRenewCodec(b *testing.B) {
	m := &Renew{Seq: 1, Leases: make([]LeaseRef, 10000)}
	for i := range m.Leases {
		m.Leases[i] = LeaseRef{ID: LeaseID(i + 1), Token: tok(byte(i))}
	}
	buf := AppendFrame(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFrame(buf[:0], m)
		got, err := Decode(buf[4:])
		if err != nil || len(got.(*Renew).Leases) != 10000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkBlockCodec encodes the header of a 2 MiB BLOCK with 16 digests
// (what an edge writes before the data, with writev) and decodes the whole
// frame (Data aliases it, so no copy of the 2 MiB).
func BenchmarkBlockCodec(b *testing.B) {
	m := &Block{ReadID: 1, Lease: 2, Index: 3, Tokens: 16, Checksum: 4, Digests: make([]uint64, 16), Data: make([]byte, 2<<20)}
	frame := AppendFrame(nil, m)[4:]
	var hdr []byte
	b.ReportAllocs()
	for b.Loop() {
		hdr = AppendBlockHeader(hdr[:0], m)
		got, err := Decode(frame)
		if err != nil || len(got.(*Block).Data) != 2<<20 {
			b.Fatal(err)
		}
	}
}
