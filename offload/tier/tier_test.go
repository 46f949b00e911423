package tier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
)

var testGeometry = Geometry{NumBlocks: 4, BlockBytes: 1000, DigestsPerBlock: 70} // > one digest chunk

// th is a test hash made from a number: distinct numbers, distinct hashes.
func th(n uint64) kvblock.Hash {
	var h kvblock.Hash
	binary.LittleEndian.PutUint64(h[:], n)
	h[15] = 0x7e
	return h
}

// block returns deterministic content for hash h.
func block(g Geometry, h kvblock.Hash) ([]uint64, []byte) {
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(h[:]), 1))
	d := make([]uint64, g.DigestsPerBlock)
	for i := range d {
		d[i] = rng.Uint64()
	}
	b := make([]byte, g.BlockBytes)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return d, b
}

func buffers(g Geometry) ([]uint64, []byte) {
	return make([]uint64, g.DigestsPerBlock), make([]byte, g.BlockBytes)
}

func newDisk(t *testing.T, g Geometry) *Disk {
	t.Helper()
	d, err := NewDisk(DiskConfig{Dir: t.TempDir(), Geometry: g})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func stores(t *testing.T) map[string]Store {
	m, err := NewMemory(testGeometry)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]Store{"memory": m, "disk": newDisk(t, testGeometry)}
}

func TestRoundTrip(t *testing.T) {
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			g := testGeometry
			dst, buf := buffers(g)
			if ok, err := s.Read(1, th(7), dst, buf); ok || err != nil {
				t.Fatalf("never-written slot: Read = %v, %v; want a miss", ok, err)
			}
			for slot := range offload.Slot(g.NumBlocks) {
				d, b := block(g, th(uint64(100+slot)))
				if err := s.Write(slot, th(uint64(100+slot)), d, b); err != nil {
					t.Fatal(err)
				}
			}
			// Overwrite slot 2 with another block: the slot was reused.
			d2, b2 := block(g, th(300))
			if err := s.Write(2, th(300), d2, b2); err != nil {
				t.Fatal(err)
			}
			for slot := range offload.Slot(g.NumBlocks) {
				h := th(uint64(100 + slot))
				if slot == 2 {
					h = th(300)
				}
				ok, err := s.Read(slot, h, dst, buf)
				want, wantB := block(g, h)
				if !ok || err != nil || !slices.Equal(dst, want) || !slices.Equal(buf, wantB) {
					t.Fatalf("slot %d: Read = %v, %v, equal %v", slot, ok, err, slices.Equal(buf, wantB))
				}
			}
			if ok, err := s.Read(2, th(102), dst, buf); ok || err != nil {
				t.Fatalf("reading slot 2 as its previous block: %v, %v; want a miss", ok, err)
			}
			if err := s.Write(offload.Slot(g.NumBlocks), th(1), d2, b2); !errors.Is(err, ErrSlot) {
				t.Fatalf("Write out of range: %v", err)
			}
			if _, err := s.Read(-1, th(1), dst, buf); !errors.Is(err, ErrSlot) {
				t.Fatalf("Read out of range: %v", err)
			}
			if err := s.Write(0, th(1), d2[1:], b2); !errors.Is(err, ErrSize) {
				t.Fatalf("Write short digests: %v", err)
			}
			if ok, err := s.Read(0, th(100), dst, buf[1:]); ok || !errors.Is(err, ErrSize) {
				t.Fatalf("Read short buffer: %v, %v", ok, err)
			}
		})
	}
}

func TestGeometryValidate(t *testing.T) {
	for _, g := range []Geometry{
		{NumBlocks: 0, BlockBytes: 1},
		{NumBlocks: 1, BlockBytes: -1},
		{NumBlocks: 1, DigestsPerBlock: -1},
		{NumBlocks: 1 << 20, BlockBytes: 1 << 30},
	} {
		if g.Validate() == nil {
			t.Errorf("%+v: Validate() = nil", g)
		}
		if _, err := NewMemory(g); err == nil {
			t.Errorf("%+v: NewMemory accepted", g)
		}
	}
	if _, err := NewDisk(DiskConfig{Geometry: testGeometry}); err == nil {
		t.Error("NewDisk without a directory")
	}
}

// TestDiskCorruptTruncateDeleteAreMisses damages records every way a crash
// or a bad disk can — a flipped byte anywhere in the record, a truncated
// file, trailing bytes, a deleted file, a leftover temporary file — and
// shows each read is a miss, never served, while untouched slots still read.
func TestDiskCorruptTruncateDeleteAreMisses(t *testing.T) {
	g := Geometry{NumBlocks: 4, BlockBytes: 256, DigestsPerBlock: 3}
	d := newDisk(t, g)
	write := func(slot offload.Slot) {
		t.Helper()
		dig, b := block(g, th(uint64(slot+1)))
		if err := d.Write(slot, th(uint64(slot+1)), dig, b); err != nil {
			t.Fatal(err)
		}
	}
	dst, buf := buffers(g)
	read := func(slot offload.Slot) bool {
		t.Helper()
		ok, err := d.Read(slot, th(uint64(slot+1)), dst, buf)
		if err != nil {
			t.Fatalf("slot %d: %v", slot, err)
		}
		if ok {
			want, wantB := block(g, th(uint64(slot+1)))
			if !slices.Equal(dst, want) || !slices.Equal(buf, wantB) {
				t.Fatalf("slot %d served wrong content", slot)
			}
		}
		return ok
	}
	size := recordHeaderSize + 8*g.DigestsPerBlock + g.BlockBytes
	// Every field: magic, version, reserved, hash, lengths, checksum,
	// digests, first and last data byte.
	offsets := []int{0, 4, 6, 8, 23, 24, 28, 32, 39, recordHeaderSize, recordHeaderSize + 8*g.DigestsPerBlock, size - 1}
	for _, off := range offsets {
		write(0)
		raw, err := os.ReadFile(d.Path(0))
		if err != nil || len(raw) != size {
			t.Fatalf("record is %d bytes (%v), want %d", len(raw), err, size)
		}
		raw[off] ^= 0x40
		if err := os.WriteFile(d.Path(0), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if read(0) {
			t.Fatalf("byte %d corrupted: served", off)
		}
	}
	for _, n := range []int{0, 10, recordHeaderSize, size - 1} {
		write(1)
		if err := os.Truncate(d.Path(1), int64(n)); err != nil {
			t.Fatal(err)
		}
		if read(1) {
			t.Fatalf("truncated to %d bytes: served", n)
		}
	}
	write(1)
	f, err := os.OpenFile(d.Path(1), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0})
	f.Close()
	if read(1) {
		t.Fatal("record with a trailing byte: served")
	}
	// A version 1 record (64-bit hash, 32-byte header), well formed and
	// with a valid checksum, whose 64-bit hash is the first half of the
	// one asked for: a miss, because its identity is of another function.
	{
		dig, b := block(g, th(1))
		h := th(1)
		v1 := append([]byte(recordMagic), 1, 0, 0, 0)
		v1 = append(v1, h[:8]...)
		v1 = binary.LittleEndian.AppendUint32(v1, uint32(len(dig)))
		v1 = binary.LittleEndian.AppendUint32(v1, uint32(len(b)))
		var body []byte
		for _, v := range dig {
			body = binary.LittleEndian.AppendUint64(body, v)
		}
		body = append(body, b...)
		sum := xxhash.Sum64(append(slices.Clone(v1), body...))
		v1 = binary.LittleEndian.AppendUint64(v1, sum)
		if err := os.WriteFile(d.Path(1), append(v1, body...), 0o644); err != nil {
			t.Fatal(err)
		}
		if read(1) {
			t.Fatal("version 1 record: served")
		}
	}
	write(2)
	if err := os.Remove(d.Path(2)); err != nil {
		t.Fatal(err)
	}
	if read(2) {
		t.Fatal("deleted record: served")
	}
	// A crash between creating the temporary file and the rename leaves a
	// temp file and no record: a miss, and reopening cleans it up.
	tmp := filepath.Join(d.cfg.Dir, "slot-00000003-123.tmp")
	if err := os.WriteFile(tmp, []byte("KVLB partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	if read(3) {
		t.Fatal("slot with only a temp file: served")
	}
	write(2)
	if !read(2) {
		t.Fatal("rewritten slot 2 is a miss")
	}
	d2, err := NewDisk(d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("NewDisk left the temp file: %v", err)
	}
	if ok, err := d2.Read(2, th(3), dst, buf); !ok || err != nil {
		t.Fatalf("reopened tier lost slot 2: %v, %v", ok, err)
	}
	entries, _ := os.ReadDir(d.cfg.Dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), tempSuffix) {
			t.Fatalf("temp file %s left behind by a write", e.Name())
		}
	}
}

func TestDiskSync(t *testing.T) {
	g := Geometry{NumBlocks: 1, BlockBytes: 8, DigestsPerBlock: 1}
	d, err := NewDisk(DiskConfig{Dir: t.TempDir(), Geometry: g, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	dig, b := block(g, th(9))
	if err := d.Write(0, th(9), dig, b); err != nil {
		t.Fatal(err)
	}
	dst, buf := buffers(g)
	if ok, err := d.Read(0, th(9), dst, buf); !ok || err != nil {
		t.Fatalf("Read = %v, %v", ok, err)
	}
}

func TestDiskWriteErrorLeavesNoRecord(t *testing.T) {
	g := Geometry{NumBlocks: 1, BlockBytes: 8, DigestsPerBlock: 1}
	d := newDisk(t, g)
	if err := os.RemoveAll(d.cfg.Dir); err != nil {
		t.Fatal(err)
	}
	dig, b := block(g, th(9))
	if err := d.Write(0, th(9), dig, b); err == nil || !strings.HasPrefix(err.Error(), "tier: ") {
		t.Fatalf("Write into a removed directory: %v", err)
	}
	dst, buf := buffers(g)
	if ok, err := d.Read(0, th(9), dst, buf); ok || err != nil {
		t.Fatalf("Read = %v, %v; want a miss", ok, err)
	}
}

func ExampleDisk() {
	dir, _ := os.MkdirTemp("", "kvtier")
	defer os.RemoveAll(dir)
	d, _ := NewDisk(DiskConfig{Dir: dir, Geometry: Geometry{NumBlocks: 2, BlockBytes: 4, DigestsPerBlock: 1}})
	_ = d.Write(1, th(0xabc), []uint64{42}, []byte("kv!!"))
	dig, data := make([]uint64, 1), make([]byte, 4)
	ok, _ := d.Read(1, th(0xabc), dig, data)
	fmt.Println(ok, dig[0], string(data))
	ok, _ = d.Read(0, th(0xabc), dig, data)
	fmt.Println(ok)
	// Output:
	// true 42 kv!!
	// false
}
