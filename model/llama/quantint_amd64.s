#include "textflag.h"
#include "hsum_amd64.h"

// The integer kernels (dotIntGeneric states the order; these perform the
// same operations). Arguments: rows consecutive weight rows of nblocks
// blocks (super-blocks for the K-quants); the rounded inputs (acts): xq
// their quants, xd their scales, bs the K-quants' sums of 16; x1 kernels
// take input 0, x4 kernels inputs 0-3 (strides nblocks·block bytes,
// nblocks·4 and nblocks·32), writing out[r·outStride + i]. A group of 32
// weights times 32 inputs: VPSIGNB moves the weights' signs to the inputs
// (signed types), VPMADDUBSW multiplies |w| by them into 16 int16 pair
// sums (at most 2·128·127: no saturation), VPMADDWD by 1 (or the
// sub-block's scale) into the eight int32 lanes of dotIntGeneric.

DATA one16<>+0(SB)/8, $0x0001000100010001
DATA one16<>+8(SB)/8, $0x0001000100010001
DATA one16<>+16(SB)/8, $0x0001000100010001
DATA one16<>+24(SB)/8, $0x0001000100010001
GLOBL one16<>(SB), RODATA|NOPTR, $32


// func dotQ8Ix1AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix1AVX2(SB), NOSPLIT, $0-64
	MOVQ    raw+0(FP), SI
	MOVQ    rows+8(FP), BX
	MOVQ    out+48(FP), R12
	VMOVDQU one16<>(SB), Y15

q8i1row:
	VXORPS Y0, Y0, Y0
	MOVQ   xq+24(FP), AX
	MOVQ   xd+32(FP), R10
	MOVQ   nblocks+16(FP), CX

q8i1block:
	PREFETCHT0   544(SI)
	VMOVDQU      2(SI), Y1
	VMOVDQU      (AX), Y2
	VPSIGNB      Y1, Y2, Y2
	VPABSB       Y1, Y1
	VPMADDUBSW   Y2, Y1, Y1
	VPMADDWD     Y15, Y1, Y1
	VCVTDQ2PS    Y1, Y1
	VPBROADCASTW (SI), X7
	VCVTPH2PS    X7, Y7
	VBROADCASTSS (R10), Y6
	VMULPS       Y6, Y7, Y7
	VFMADD231PS  Y1, Y7, Y0
	ADDQ         $34, SI
	ADDQ         $32, AX
	ADDQ         $4, R10
	DECQ         CX
	JNZ          q8i1block

	HSUM(Y0, X0, X1)
	VMOVSS X0, (R12)
	ADDQ   $4, R12
	DECQ   BX
	JNZ    q8i1row
	VZEROUPPER
	RET

// Q8IN(xs, ds, T, D, A): input r of a Q8_0 block (w in Y1, |w| in
// Y3, dw in Y7): quants at (AX)(xs), scale at (R10)(ds), into A.
#define Q8IN(xs, ds, T, D, A) \
	VMOVDQU      (AX)(xs), T; \
	VPSIGNB      Y1, T, T; \
	VPMADDUBSW   T, Y3, T; \
	VPMADDWD     Y15, T, T; \
	VCVTDQ2PS    T, T; \
	VBROADCASTSS (R10)(ds), D; \
	VMULPS       Y7, D, D; \
	VFMADD231PS  T, D, A

// func dotQ8Ix4AVX2(raw *byte, rows, nblocks int, xq *int8, xd *float32, bs *int16, out *float32, outStride int)
TEXT ·dotQ8Ix4AVX2(SB), NOSPLIT, $0-64
	MOVQ    raw+0(FP), SI
	MOVQ    rows+8(FP), BX
	MOVQ    nblocks+16(FP), DX
	SHLQ    $5, DX            // quants stride
	LEAQ    (DX)(DX*2), R8
	MOVQ    nblocks+16(FP), R11
	SHLQ    $2, R11           // scales stride
	LEAQ    (R11)(R11*2), R13
	MOVQ    out+48(FP), R12
	MOVQ    outStride+56(FP), R14
	SHLQ    $2, R14
	VMOVDQU one16<>(SB), Y15
	XORQ    R9, R9

q8i4row:
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	MOVQ   xq+24(FP), AX
	MOVQ   xd+32(FP), R10
	MOVQ   nblocks+16(FP), CX

q8i4block:
	PREFETCHT0   544(SI)
	VMOVDQU      2(SI), Y1
	VPABSB       Y1, Y3
	VPBROADCASTW (SI), X7
	VCVTPH2PS    X7, Y7
	Q8IN(R9*1, R9*1, Y2, Y4, Y8)
	Q8IN(DX*1, R11*1, Y5, Y6, Y9)
	Q8IN(DX*2, R11*2, Y12, Y13, Y10)
	ADDQ         $34, SI
	Q8IN(R8*1, R13*1, Y14, Y0, Y11)
	ADDQ         $32, AX
	ADDQ         $4, R10
	DECQ         CX
	JNZ          q8i4block

	HSUM(Y8, X8, X1)
	VMOVSS X8, (R12)
	HSUM(Y9, X9, X1)
	VMOVSS X9, (R12)(R14*1)
	HSUM(Y10, X10, X1)
	VMOVSS X10, (R12)(R14*2)
	HSUM(Y11, X11, X1)
	LEAQ   (R12)(R14*2), CX
	VMOVSS X11, (CX)(R14*1)
	ADDQ   $4, R12
	DECQ   BX
	JNZ    q8i4row
	VZEROUPPER
	RET
