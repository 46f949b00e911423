#include "textflag.h"

// fillLanes<> is (i+1)·golden modulo 2^64 for the eight lanes i of a chunk.
DATA fillLanes<>+0(SB)/8, $0x9e3779b97f4a7c15
DATA fillLanes<>+8(SB)/8, $0x3c6ef372fe94f82a
DATA fillLanes<>+16(SB)/8, $0xdaa66d2c7ddf743f
DATA fillLanes<>+24(SB)/8, $0x78dde6e5fd29f054
DATA fillLanes<>+32(SB)/8, $0x1715609f7c746c69
DATA fillLanes<>+40(SB)/8, $0xb54cda58fbbee87e
DATA fillLanes<>+48(SB)/8, $0x538454127b096493
DATA fillLanes<>+56(SB)/8, $0xf1bbcdcbfa53e0a8
GLOBL fillLanes<>(SB), RODATA|NOPTR, $64

// func fillAVX512(dst *byte, sts *uint64, nsec, chunks int)
//
// nsec sections of chunks 64-byte chunks each, one after the other from
// dst; section j's stream starts at sts[j]. Lane i (0..7) of chunk k of a
// section is output 8k+i+1 of its splitmix64 stream: the 8 little-endian
// bytes of mix64(st + (8k+i+1)·golden), as fill writes them one by one.
// nsec and chunks are positive.
TEXT ·fillAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ sts+8(FP), SI
	MOVQ nsec+16(FP), DX
	MOVQ chunks+24(FP), R8
	MOVQ $0xf1bbcdcbfa53e0a8, AX // 8·golden: a chunk's step
	VPBROADCASTQ AX, Z1
	MOVQ $0xbf58476d1ce4e5b9, AX
	VPBROADCASTQ AX, Z2
	MOVQ $0x94d049bb133111eb, AX
	VPBROADCASTQ AX, Z3
	VMOVDQU64 fillLanes<>(SB), Z6

section:
	VPBROADCASTQ (SI), Z0
	VPADDQ       Z6, Z0, Z0 // lane i: st + (i+1)·golden
	MOVQ         R8, CX

chunk:
	VPSRLQ    $30, Z0, Z4
	VPXORQ    Z0, Z4, Z4
	VPMULLQ   Z2, Z4, Z4
	VPSRLQ    $27, Z4, Z5
	VPXORQ    Z5, Z4, Z4
	VPMULLQ   Z3, Z4, Z4
	VPSRLQ    $31, Z4, Z5
	VPXORQ    Z5, Z4, Z4
	VMOVDQU64 Z4, (DI)
	VPADDQ    Z1, Z0, Z0
	ADDQ      $64, DI
	DECQ      CX
	JNZ       chunk

	ADDQ $8, SI
	DECQ DX
	JNZ  section

	VZEROUPPER
	RET
