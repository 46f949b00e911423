package tier

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cespare/xxhash/v2"

	"github.com/kvlease/kvlease/kvblock"
	"github.com/kvlease/kvlease/offload"
)

// Disk record format, little endian:
//
//	off  size  field
//	0    4     magic "KVLB"
//	4    2     version (2)
//	6    2     reserved (0)
//	8    16    block hash (kvblock.Hash)
//	24   4     number of digests
//	28   4     data length in bytes
//	32   8     xxhash64 of bytes 0..32, the digests and the data
//	40   8·n   digests
//	...  len   data
//
// The checksum covers the header fields too, so a flipped bit anywhere —
// hash, lengths, digests, data — is a miss. The file must end exactly after
// the data. Version 1 records (a 64-bit hash, a 32-byte header) are
// misses: their hash is of another function, so their identity cannot be
// trusted. (A new Manager starts with an empty slot map anyway, so records
// of an earlier process are never looked up.) The xxhash64 is a checksum
// against damage, not an identity: the record is found by its slot and
// accepted only if its 128-bit hash equals the one asked for.
const (
	recordMagic      = "KVLB"
	recordVersion    = 2
	recordHeaderSize = 40
	digestChunk      = 64 // digests encoded per stack buffer
	tempSuffix       = ".tmp"
)

// DiskConfig configures a disk tier.
type DiskConfig struct {
	// Dir holds the tier's files; it is created if missing. Use a
	// directory of its own: NewDisk removes leftover temporary files in it.
	Dir string
	Geometry
	// Sync makes Write fsync the record and the directory before it
	// returns. Without it a crash can lose recent writes, but never serve
	// a torn one: the checksum turns it into a miss. A cache tier rarely
	// needs Sync.
	Sync bool
}

// Disk is a tier of one file per slot ("slot-00000042.kvb").
//
// Why one file per slot rather than a few large files: a write goes to a
// temporary file and is renamed over the slot's file, so a reader — in this
// process or after a crash — sees the old record or the new one, never a
// mix; a lost or damaged slot is one missing file; and there is no
// allocation map to keep consistent on disk, because the Manager owns the
// slot map and starts empty. The cost is one file (an inode and an open)
// per block, fine for KV blocks of hundreds of KiB or more.
//
// Safe for concurrent use: writes and reads of distinct slots, reads of one
// slot, and even a read racing a write of the same slot (the read sees one
// whole record).
type Disk struct {
	cfg   DiskConfig
	paths []string
}

// NewDisk opens (creating if needed) a disk tier. Records already in the
// directory are kept but unknown to a new Manager, so they are overwritten
// as slots are reused; temporary files of interrupted writes are removed.
func NewDisk(cfg DiskConfig) (*Disk, error) {
	if err := cfg.Geometry.Validate(); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, errors.New("tier: DiskConfig.Dir is empty")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("tier: %w", err)
	}
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("tier: %w", err)
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, "slot-") && strings.HasSuffix(name, tempSuffix) {
			if err := os.Remove(filepath.Join(cfg.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("tier: removing leftover %w", err)
			}
		}
	}
	d := &Disk{cfg: cfg, paths: make([]string, cfg.NumBlocks)}
	for i := range d.paths {
		d.paths[i] = filepath.Join(cfg.Dir, fmt.Sprintf("slot-%08d.kvb", i))
	}
	return d, nil
}

// Geometry returns the tier's geometry.
func (d *Disk) Geometry() Geometry { return d.cfg.Geometry }

// Path is the file of slot (for tests and operators).
func (d *Disk) Path(slot offload.Slot) string { return d.paths[slot] }

func (d *Disk) header(hash kvblock.Hash, digests []uint64, data []byte) [recordHeaderSize]byte {
	var h [recordHeaderSize]byte
	copy(h[0:4], recordMagic)
	binary.LittleEndian.PutUint16(h[4:], recordVersion)
	copy(h[8:24], hash[:])
	binary.LittleEndian.PutUint32(h[24:], uint32(len(digests)))
	binary.LittleEndian.PutUint32(h[28:], uint32(len(data)))
	var x xxhash.Digest
	x.Reset()
	x.Write(h[:32])
	var buf [8 * digestChunk]byte
	for i := 0; i < len(digests); i += digestChunk {
		x.Write(encodeDigests(&buf, digests[i:min(i+digestChunk, len(digests))]))
	}
	x.Write(data)
	binary.LittleEndian.PutUint64(h[32:], x.Sum64())
	return h
}

func encodeDigests(buf *[8 * digestChunk]byte, digests []uint64) []byte {
	for i, v := range digests {
		binary.LittleEndian.PutUint64(buf[8*i:], v)
	}
	return buf[:8*len(digests)]
}

// Write implements Store: it writes a temporary file and renames it over
// the slot's file.
func (d *Disk) Write(slot offload.Slot, hash kvblock.Hash, digests []uint64, data []byte) (err error) {
	if err := d.cfg.check(slot, digests, data); err != nil {
		return err
	}
	hdr := d.header(hash, digests, data)
	f, err := os.CreateTemp(d.cfg.Dir, fmt.Sprintf("slot-%08d-*%s", slot, tempSuffix))
	if err != nil {
		return fmt.Errorf("tier: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("tier: writing slot %d: %w", slot, err)
		}
	}()
	if _, err := f.Write(hdr[:]); err != nil {
		return err
	}
	var buf [8 * digestChunk]byte
	for i := 0; i < len(digests); i += digestChunk {
		if _, err := f.Write(encodeDigests(&buf, digests[i:min(i+digestChunk, len(digests))])); err != nil {
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if d.cfg.Sync {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), d.paths[slot]); err != nil {
		return err
	}
	if d.cfg.Sync {
		dir, err := os.Open(d.cfg.Dir)
		if err != nil {
			return err
		}
		defer dir.Close()
		return dir.Sync()
	}
	return nil
}

// Read implements Store. It copies the record straight into digests and
// data, allocating nothing but the open file. A missing file, a short or
// long one, a wrong magic, version, hash or length, or a checksum mismatch
// is a miss.
func (d *Disk) Read(slot offload.Slot, hash kvblock.Hash, digests []uint64, data []byte) (bool, error) {
	if err := d.cfg.check(slot, digests, data); err != nil {
		return false, err
	}
	f, err := os.Open(d.paths[slot])
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("tier: %w", err)
	}
	defer f.Close()
	ok, err := readRecord(f, hash, digests, data)
	if err != nil {
		return false, fmt.Errorf("tier: reading slot %d: %w", slot, err)
	}
	return ok, nil
}

// readRecord reads and verifies one record; short reads are misses, other
// read errors are errors.
func readRecord(r io.Reader, hash kvblock.Hash, digests []uint64, data []byte) (bool, error) {
	miss := func(err error) (bool, error) {
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, nil
		}
		return false, err
	}
	var h [recordHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return miss(err)
	}
	if string(h[0:4]) != recordMagic ||
		binary.LittleEndian.Uint16(h[4:]) != recordVersion ||
		binary.LittleEndian.Uint16(h[6:]) != 0 ||
		kvblock.Hash(h[8:24]) != hash ||
		binary.LittleEndian.Uint32(h[24:]) != uint32(len(digests)) ||
		binary.LittleEndian.Uint32(h[28:]) != uint32(len(data)) {
		return false, nil
	}
	var x xxhash.Digest
	x.Reset()
	x.Write(h[:32])
	var buf [8 * digestChunk]byte
	for i := 0; i < len(digests); i += digestChunk {
		chunk := digests[i:min(i+digestChunk, len(digests))]
		b := buf[:8*len(chunk)]
		if _, err := io.ReadFull(r, b); err != nil {
			return miss(err)
		}
		x.Write(b)
		for j := range chunk {
			chunk[j] = binary.LittleEndian.Uint64(b[8*j:])
		}
	}
	if _, err := io.ReadFull(r, data); err != nil {
		return miss(err)
	}
	x.Write(data)
	if n, err := r.Read(buf[:1]); n != 0 || !errors.Is(err, io.EOF) {
		return miss(err) // trailing bytes: not a record we wrote
	}
	if x.Sum64() != binary.LittleEndian.Uint64(h[32:]) {
		return false, nil
	}
	return true, nil
}
