package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/kvlease/kvlease/model/llama"
)

// Magic is the first four bytes of a GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the tensor data alignment when general.alignment is
// absent.
const DefaultAlignment = 32

// Metadata value types (gguf_type).
const (
	TypeUint8   uint32 = 0
	TypeInt8    uint32 = 1
	TypeUint16  uint32 = 2
	TypeInt16   uint32 = 3
	TypeUint32  uint32 = 4
	TypeInt32   uint32 = 5
	TypeFloat32 uint32 = 6
	TypeBool    uint32 = 7
	TypeString  uint32 = 8
	TypeArray   uint32 = 9
	TypeUint64  uint32 = 10
	TypeInt64   uint32 = 11
	TypeFloat64 uint32 = 12
)

// Errors a caller may test with errors.Is.
var (
	ErrFormat      = errors.New("gguf: not a GGUF v3 file")
	ErrTruncated   = errors.New("gguf: truncated file")
	ErrUnsupported = errors.New("gguf: unsupported")
)

// Tensor describes one tensor of the file. Dims are GGUF's ne: Dims[0] is
// the number of columns (the fastest-varying index).
type Tensor struct {
	Name   string
	Dims   []uint64
	Type   uint32 // ggml_type
	Offset uint64 // from the start of the data section
	// Data is the tensor's bytes (aliasing the parsed buffer) when its type
	// has a known size (every ggml type, see TypeSize); nil otherwise.
	Data []byte
}

// File is a parsed GGUF file. Metadata values are uint8…uint64, int8…int64,
// float32, float64, bool, string, or slices of those ([]string, []float32,
// []int32, []uint32, …; nested arrays are []any).
type File struct {
	Version   uint32
	Metadata  map[string]any
	Keys      []string // metadata keys in file order
	Tensors   []Tensor
	Alignment int
}

// Limits on what a file may declare, so that a corrupt or hostile header
// fails cleanly instead of allocating without bound.
const (
	maxTensors  = 1 << 16
	maxKeys     = 1 << 16
	maxDims     = 4
	maxArrayLen = 1 << 24
)

type reader struct {
	b   []byte
	off int
}

func (r *reader) need(n uint64) error {
	if n > uint64(len(r.b)-r.off) {
		return fmt.Errorf("%w: need %d bytes at offset %d of %d", ErrTruncated, n, r.off, len(r.b))
	}
	return nil
}

func (r *reader) u8() (uint8, error) {
	if err := r.need(1); err != nil {
		return 0, err
	}
	r.off++
	return r.b[r.off-1], nil
}

func (r *reader) u16() (uint16, error) {
	if err := r.need(2); err != nil {
		return 0, err
	}
	r.off += 2
	return binary.LittleEndian.Uint16(r.b[r.off-2:]), nil
}

func (r *reader) u32() (uint32, error) {
	if err := r.need(4); err != nil {
		return 0, err
	}
	r.off += 4
	return binary.LittleEndian.Uint32(r.b[r.off-4:]), nil
}

func (r *reader) u64() (uint64, error) {
	if err := r.need(8); err != nil {
		return 0, err
	}
	r.off += 8
	return binary.LittleEndian.Uint64(r.b[r.off-8:]), nil
}

func (r *reader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	if err := r.need(n); err != nil {
		return "", err
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s, nil
}

func (r *reader) scalar(t uint32) (any, error) {
	switch t {
	case TypeUint8:
		return r.u8()
	case TypeInt8:
		v, err := r.u8()
		return int8(v), err
	case TypeUint16:
		return r.u16()
	case TypeInt16:
		v, err := r.u16()
		return int16(v), err
	case TypeUint32:
		return r.u32()
	case TypeInt32:
		v, err := r.u32()
		return int32(v), err
	case TypeFloat32:
		v, err := r.u32()
		return math.Float32frombits(v), err
	case TypeBool:
		v, err := r.u8()
		if err == nil && v > 1 {
			return nil, fmt.Errorf("%w: bool value %d", ErrFormat, v)
		}
		return v == 1, err
	case TypeString:
		return r.str()
	case TypeUint64:
		return r.u64()
	case TypeInt64:
		v, err := r.u64()
		return int64(v), err
	case TypeFloat64:
		v, err := r.u64()
		return math.Float64frombits(v), err
	}
	return nil, fmt.Errorf("%w: metadata value type %d", ErrFormat, t)
}

// minSize is the smallest encoding of a value of type t, to bound array
// lengths by the bytes left.
func minSize(t uint32) uint64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	default:
		return 8
	}
}

func (r *reader) value(t uint32, depth int) (any, error) {
	if t != TypeArray {
		return r.scalar(t)
	}
	if depth > 2 {
		return nil, fmt.Errorf("%w: arrays nested too deep", ErrFormat)
	}
	et, err := r.u32()
	if err != nil {
		return nil, err
	}
	n, err := r.u64()
	if err != nil {
		return nil, err
	}
	if n > maxArrayLen || n*minSize(et) > uint64(len(r.b)-r.off) {
		return nil, fmt.Errorf("%w: array of %d elements at offset %d", ErrTruncated, n, r.off)
	}
	switch et {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			if out[i], err = r.str(); err != nil {
				return nil, err
			}
		}
		return out, nil
	case TypeFloat32:
		out := make([]float32, n)
		for i := range out {
			v, err := r.u32()
			if err != nil {
				return nil, err
			}
			out[i] = math.Float32frombits(v)
		}
		return out, nil
	case TypeInt32:
		out := make([]int32, n)
		for i := range out {
			v, err := r.u32()
			if err != nil {
				return nil, err
			}
			out[i] = int32(v)
		}
		return out, nil
	case TypeUint32:
		out := make([]uint32, n)
		for i := range out {
			if out[i], err = r.u32(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	out := make([]any, n)
	for i := range out {
		if out[i], err = r.value(et, depth+1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TypeSize is the size in bytes of n elements of ggml type t, or false when
// n is not a whole number of t's blocks or t is not a ggml type with a
// known block size (see llama.Type).
func TypeSize(t uint32, n uint64) (uint64, bool) {
	if t > 255 {
		return 0, false
	}
	typ := llama.Type(t)
	b := uint64(typ.Block())
	if b == 0 || n%b != 0 {
		return 0, false
	}
	return n / b * uint64(typ.BlockBytes()), true
}

// Parse parses a GGUF v3 file held in b (typically memory-mapped). Tensor
// data slices alias b. Truncated or inconsistent files give an error wrapping
// ErrTruncated or ErrFormat.
func Parse(b []byte) (*File, error) {
	r := &reader{b: b}
	if len(b) < 4 || string(b[:4]) != Magic {
		return nil, fmt.Errorf("%w: bad magic", ErrFormat)
	}
	r.off = 4
	f := &File{Metadata: map[string]any{}, Alignment: DefaultAlignment}
	var err error
	if f.Version, err = r.u32(); err != nil {
		return nil, err
	}
	if f.Version != 3 {
		return nil, fmt.Errorf("%w: version %d (only 3 loads)", ErrUnsupported, f.Version)
	}
	nt, err := r.u64()
	if err != nil {
		return nil, err
	}
	nk, err := r.u64()
	if err != nil {
		return nil, err
	}
	if nt > maxTensors || nk > maxKeys {
		return nil, fmt.Errorf("%w: %d tensors, %d metadata keys", ErrFormat, nt, nk)
	}
	for i := uint64(0); i < nk; i++ {
		k, err := r.str()
		if err != nil {
			return nil, err
		}
		t, err := r.u32()
		if err != nil {
			return nil, err
		}
		v, err := r.value(t, 0)
		if err != nil {
			return nil, fmt.Errorf("metadata %q: %w", k, err)
		}
		if _, dup := f.Metadata[k]; dup {
			return nil, fmt.Errorf("%w: metadata key %q twice", ErrFormat, k)
		}
		f.Metadata[k] = v
		f.Keys = append(f.Keys, k)
	}
	if a, ok := f.Metadata["general.alignment"]; ok {
		av, ok := a.(uint32)
		if !ok || av == 0 || av&(av-1) != 0 || av > 1<<16 {
			return nil, fmt.Errorf("%w: general.alignment %v", ErrFormat, a)
		}
		f.Alignment = int(av)
	}
	for i := uint64(0); i < nt; i++ {
		var t Tensor
		if t.Name, err = r.str(); err != nil {
			return nil, err
		}
		nd, err := r.u32()
		if err != nil {
			return nil, err
		}
		if nd == 0 || nd > maxDims {
			return nil, fmt.Errorf("%w: tensor %q has %d dimensions", ErrFormat, t.Name, nd)
		}
		t.Dims = make([]uint64, nd)
		for j := range t.Dims {
			if t.Dims[j], err = r.u64(); err != nil {
				return nil, err
			}
			if t.Dims[j] == 0 || t.Dims[j] > 1<<32 {
				return nil, fmt.Errorf("%w: tensor %q dimension %d", ErrFormat, t.Name, t.Dims[j])
			}
		}
		if t.Type, err = r.u32(); err != nil {
			return nil, err
		}
		if t.Offset, err = r.u64(); err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, t)
	}
	data := (r.off + f.Alignment - 1) / f.Alignment * f.Alignment
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%uint64(f.Alignment) != 0 {
			return nil, fmt.Errorf("%w: tensor %q at unaligned offset %d", ErrFormat, t.Name, t.Offset)
		}
		n := uint64(1)
		for _, d := range t.Dims {
			if n > 1<<40/d {
				return nil, fmt.Errorf("%w: tensor %q too large", ErrFormat, t.Name)
			}
			n *= d
		}
		size, ok := TypeSize(t.Type, n)
		if !ok {
			continue // a type we do not size: the model loader names it
		}
		start := uint64(data) + t.Offset
		if start > uint64(len(b)) || size > uint64(len(b))-start {
			return nil, fmt.Errorf("%w: tensor %q needs bytes [%d, %d) of %d", ErrTruncated, t.Name, start, start+size, len(b))
		}
		t.Data = b[start : start+size : start+size]
	}
	return f, nil
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			return &f.Tensors[i], true
		}
	}
	return nil, false
}

// Uint returns an unsigned or non-negative integer metadata value.
func (f *File) Uint(key string) (uint64, bool) {
	switch v := f.Metadata[key].(type) {
	case uint8:
		return uint64(v), true
	case uint16:
		return uint64(v), true
	case uint32:
		return uint64(v), true
	case uint64:
		return v, true
	case int8:
		return uint64(v), v >= 0
	case int16:
		return uint64(v), v >= 0
	case int32:
		return uint64(v), v >= 0
	case int64:
		return uint64(v), v >= 0
	}
	return 0, false
}

// Float returns a floating-point metadata value.
func (f *File) Float(key string) (float64, bool) {
	switch v := f.Metadata[key].(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// String returns a string metadata value.
func (f *File) String(key string) (string, bool) {
	s, ok := f.Metadata[key].(string)
	return s, ok
}
