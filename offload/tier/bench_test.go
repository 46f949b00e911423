package tier

import (
	"testing"

	"github.com/kvlease/kvlease/offload"
)

// 2 MiB blocks: 16 tokens of an 8B-class model (2 × 32 layers × 8 kv heads
// × 128 dims × 2 bytes = 128 KiB per token).
var benchGeometry = Geometry{NumBlocks: 16, BlockBytes: 2 << 20, DigestsPerBlock: 16}

func benchCopy(b *testing.B, s Store) {
	d, data := block(Geometry{BlockBytes: benchGeometry.BlockBytes, DigestsPerBlock: benchGeometry.DigestsPerBlock}, th(1))
	dst, buf := buffers(benchGeometry)
	for slot := range benchGeometry.NumBlocks {
		if err := s.Write(offload.Slot(slot), th(uint64(slot+1)), d, data); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("write", func(b *testing.B) {
		b.SetBytes(int64(benchGeometry.BlockBytes))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			slot := i % benchGeometry.NumBlocks
			if err := s.Write(offload.Slot(slot), th(uint64(slot+1)), d, data); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("read", func(b *testing.B) {
		b.SetBytes(int64(benchGeometry.BlockBytes))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			slot := i % benchGeometry.NumBlocks
			if ok, err := s.Read(offload.Slot(slot), th(uint64(slot+1)), dst, buf); !ok || err != nil {
				b.Fatal(ok, err)
			}
			i++
		}
	})
}

// BenchmarkMemoryTierCopy copies 2 MiB blocks into and out of host memory.
func BenchmarkMemoryTierCopy(b *testing.B) {
	m, err := NewMemory(benchGeometry)
	if err != nil {
		b.Fatal(err)
	}
	benchCopy(b, m)
}

// BenchmarkDiskTierCopy writes (temp file + rename, no fsync) and reads
// (with checksum verification) 2 MiB records; figures depend on the file
// system of the test's temp directory and on its page cache.
func BenchmarkDiskTierCopy(b *testing.B) {
	d, err := NewDisk(DiskConfig{Dir: b.TempDir(), Geometry: benchGeometry})
	if err != nil {
		b.Fatal(err)
	}
	benchCopy(b, d)
}
