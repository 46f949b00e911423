package llamatest

import (
	"encoding/binary"
	"math"

	"github.com/kvlease/kvlease/model/llama"
)

// The quantisers below write ggml's block layouts (see model/llama's
// quant.go) by plain rounding to nearest: not llama-quantize's searches for
// the best scales, but valid blocks whose decoding is close to the input,
// which is what tests and benchmarks need.

func putF16(b []byte, f float32) float32 {
	h := llama.F32ToF16(f)
	binary.LittleEndian.PutUint16(b, h)
	return llama.F16ToF32(h)
}

func clampRound(v float32, lo, hi int) int {
	q := int(math.Round(float64(v)))
	return min(max(q, lo), hi)
}

// absMax is the element of x with the largest magnitude (signed).
func absMax(x []float32) float32 {
	m := float32(0)
	for _, v := range x {
		if math.Abs(float64(v)) > math.Abs(float64(m)) {
			m = v
		}
	}
	return m
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// inv is 1/d, or 0 for d = 0.
func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// quantize32 writes the 32 weights of x as one Q4_0, Q4_1, Q5_0 or Q5_1
// block.
func quantize32(t llama.Type, x []float32, blk []byte) {
	var q [32]int
	switch t {
	case llama.Q4_0, llama.Q5_0:
		off := 8
		if t == llama.Q5_0 {
			off = 16
		}
		d := putF16(blk, absMax(x)/float32(-off))
		for i, v := range x {
			q[i] = clampRound(v*inv(d), -off, off-1) + off
		}
	default:
		lo, hi := minMax(x)
		levels := float32(15)
		if t == llama.Q5_1 {
			levels = 31
		}
		d := putF16(blk, (hi-lo)/levels)
		m := putF16(blk[2:], lo)
		for i, v := range x {
			q[i] = clampRound((v-m)*inv(d), 0, int(levels))
		}
	}
	var qs []byte
	switch t {
	case llama.Q4_0:
		qs = blk[2:18]
	case llama.Q4_1:
		qs = blk[4:20]
	case llama.Q5_0:
		qs = blk[6:22]
	default:
		qs = blk[8:24]
	}
	var qh uint32
	for i := 0; i < 16; i++ {
		qs[i] = byte(q[i]&15 | (q[16+i]&15)<<4)
	}
	for i := range q {
		qh |= uint32(q[i]>>4&1) << i
	}
	switch t {
	case llama.Q5_0:
		binary.LittleEndian.PutUint32(blk[2:], qh)
	case llama.Q5_1:
		binary.LittleEndian.PutUint32(blk[4:], qh)
	}
}

// quantizeK45 writes the 256 weights of x as one Q4_K or Q5_K block: per
// sub-block of 32 a scale and a minimum (the offset below zero), both as
// 6-bit multiples of the block's d and dmin.
func quantizeK45(t llama.Type, x []float32, blk []byte) {
	levels := float32(15)
	if t == llama.Q5_K {
		levels = 31
	}
	var scale, mn [8]float32
	var maxScale, maxMin float32
	for k := 0; k < 8; k++ {
		lo, hi := minMax(x[32*k : 32*k+32])
		mn[k] = max(0, -lo)
		scale[k] = (hi + mn[k]) / levels
		maxScale, maxMin = max(maxScale, scale[k]), max(maxMin, mn[k])
	}
	d := putF16(blk, maxScale/63)
	dmin := putF16(blk[2:], maxMin/63)
	var sc, ms [8]int
	for k := range sc {
		sc[k] = clampRound(scale[k]*inv(d), 0, 63)
		ms[k] = clampRound(mn[k]*inv(dmin), 0, 63)
	}
	s := blk[4:16]
	for k := 0; k < 4; k++ {
		s[k] = byte(sc[k] | sc[4+k]>>4<<6)
		s[4+k] = byte(ms[k] | ms[4+k]>>4<<6)
		s[8+k] = byte(sc[4+k]&15 | (ms[4+k]&15)<<4)
	}
	qs := blk[16:144]
	if t == llama.Q5_K {
		qs = blk[48:176]
		clear(blk[16:48])
	}
	for k := 0; k < 8; k++ {
		es := d * float32(sc[k])
		em := dmin * float32(ms[k])
		for l := 0; l < 32; l++ {
			q := clampRound((x[32*k+l]+em)*inv(es), 0, int(levels))
			if k&1 == 0 {
				qs[32*(k/2)+l] = byte(q & 15)
			} else {
				qs[32*(k/2)+l] |= byte(q&15) << 4
			}
			if t == llama.Q5_K {
				blk[16+l] |= byte(q>>4&1) << k
			}
		}
	}
}

// quantizeQ6K writes the 256 weights of x as one Q6_K block: per
// sub-block of 16 an int8 multiple of d.
func quantizeQ6K(x []float32, blk []byte) {
	var scale [16]float32
	amax := float32(0)
	for k := range scale {
		scale[k] = absMax(x[16*k:16*k+16]) / -32
		amax = max(amax, float32(math.Abs(float64(scale[k]))))
	}
	d := putF16(blk[208:], amax/127)
	clear(blk[:192])
	for k := range scale {
		sc := clampRound(scale[k]*inv(d), -128, 127)
		blk[192+k] = byte(int8(sc))
		es := d * float32(sc)
		for j := 0; j < 16; j++ {
			i := 16*k + j
			q := clampRound(x[i]*inv(es), -32, 31) + 32
			h, r := i/128, i%128
			blk[64*h+r%64] |= byte(q&15) << (4 * (r / 64))
			blk[128+32*h+r%32] |= byte(q>>4) << (2 * (r / 32))
		}
	}
}
