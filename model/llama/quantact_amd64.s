#include "textflag.h"

// quantQ8AVX2 is quantQ8 (see actKind) over blocks of 32 inputs: the same
// operations, each rounded the same way (VDIVSS, VMULPS, VCVTPS2DQ to
// nearest even, VCVTPS2PH to nearest even). It stops at the first block
// whose largest |x| is below 2^-120 (zero included; 127/amax may overflow
// there) or not finite, which quantQ8 handles, and returns the number of
// blocks done. The largest |x| is the integer maximum of the bits of
// |x|: the float order on finite values, and an infinity or NaN exceeds
// every finite value. ob gets each block's −Σq (acts.ob).

DATA absQ8<>+0(SB)/4, $0x7fffffff
GLOBL absQ8<>(SB), RODATA|NOPTR, $4

DATA c127Q8<>+0(SB)/4, $127.0
GLOBL c127Q8<>(SB), RODATA|NOPTR, $4


// permQ8: VPERMD indices putting VPACKSSDW+VPACKSSWB's dwords in order.
DATA permQ8<>+0(SB)/4, $0
DATA permQ8<>+4(SB)/4, $4
DATA permQ8<>+8(SB)/4, $1
DATA permQ8<>+12(SB)/4, $5
DATA permQ8<>+16(SB)/4, $2
DATA permQ8<>+20(SB)/4, $6
DATA permQ8<>+24(SB)/4, $3
DATA permQ8<>+28(SB)/4, $7
GLOBL permQ8<>(SB), RODATA|NOPTR, $32

// func quantQ8AVX2(x *float32, nb int, q *int8, d, s *float32, ob *int32) int
TEXT ·quantQ8AVX2(SB), NOSPLIT, $0-56
	MOVQ         x+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         q+16(FP), DI
	MOVQ         d+24(FP), R8
	MOVQ         s+32(FP), R9
	MOVQ         ob+40(FP), R10
	XORQ         AX, AX
	VBROADCASTSS absQ8<>(SB), Y15
	VMOVDQU      permQ8<>(SB), Y13
	VMOVSS       c127Q8<>(SB), X12

block:
	CMPQ AX, CX
	JGE  done
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS  Y15, Y0, Y4
	VANDPS  Y15, Y1, Y5
	VANDPS  Y15, Y2, Y6
	VANDPS  Y15, Y3, Y7
	VPMAXSD Y5, Y4, Y4
	VPMAXSD Y7, Y6, Y6
	VPMAXSD Y6, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPMAXSD X5, X4, X4
	VPSHUFD $0x4e, X4, X5
	VPMAXSD X5, X4, X4
	VPSHUFD $0xb1, X4, X5
	VPMAXSD X5, X4, X4
	VMOVD   X4, BX
	SUBL    $0x03800000, BX
	CMPL    BX, $(0x7f800000-0x03800000)
	JAE     done

	// d = amax/127, id = 127/amax
	VDIVSS       X12, X4, X6
	VDIVSS       X4, X12, X7
	VBROADCASTSS X7, Y7
	VMULPS       Y7, Y0, Y0
	VMULPS       Y7, Y1, Y1
	VMULPS       Y7, Y2, Y2
	VMULPS       Y7, Y3, Y3
	VCVTPS2DQ    Y0, Y0
	VCVTPS2DQ    Y1, Y1
	VCVTPS2DQ    Y2, Y2
	VCVTPS2DQ    Y3, Y3

	// the sum of the quants
	VPADDD       Y1, Y0, Y8
	VPADDD       Y3, Y2, Y9
	VPADDD       Y9, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDD       X9, X8, X8
	VPSHUFD      $0xb1, X8, X9
	VPADDD       X9, X8, X8

	// the quants as bytes in order
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y13, Y0
	VMOVDQU   Y0, (DI)
	VMOVD     X8, BX
	NEGL      BX
	MOVL      BX, (R10)

	// dx = float16(d), s = float16(float32(d·float32(sum)))
	VCVTPS2PH $0, X6, X9
	VCVTPH2PS X9, X9
	VMOVSS    X9, (R8)
	VCVTDQ2PS X8, X8
	VMULSS    X8, X6, X8
	VCVTPS2PH $0, X8, X8
	VCVTPH2PS X8, X8
	VMOVSS    X8, (R9)

	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $4, R10
	INCQ AX
	JMP  block

done:
	MOVQ AX, ret+48(FP)
	VZEROUPPER
	RET

// quantQ8KAVX512 is quantQ8K (see actKind) over super-blocks of 256 inputs,
// without the sums of 16: the same operations, each rounded the same way
// (VDIVSS for −127/max and 1/iscale, VMULPS, VCVTPS2DQ to nearest even,
// VPMINSD with 127). It stops at the first super-block whose largest |x|
// is below 2^-120 (zero included) or not finite, which quantQ8K handles,
// and returns the number done. The largest |x| is the integer maximum of
// the bits of |x| (as quantQ8AVX2's); max is the first x with those bits.

DATA cm127K<>+0(SB)/4, $-127.0
GLOBL cm127K<>(SB), RODATA|NOPTR, $4

DATA c1K<>+0(SB)/4, $1.0
GLOBL c1K<>(SB), RODATA|NOPTR, $4

DATA i127K<>+0(SB)/4, $127
GLOBL i127K<>(SB), RODATA|NOPTR, $4

// func quantQ8KAVX512(x *float32, nb int, q *int8, d *float32) int
TEXT ·quantQ8KAVX512(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         q+16(FP), DI
	MOVQ         d+24(FP), R8
	XORQ         AX, AX
	VPBROADCASTD absQ8<>(SB), Z31
	VPBROADCASTD i127K<>(SB), Z30
q8kblock:
	CMPQ         AX, CX
	JGE          q8kdone
	VPANDD       0(SI), Z31, Z0
	VPANDD       64(SI), Z31, Z1
	VPANDD       128(SI), Z31, Z2
	VPANDD       192(SI), Z31, Z3
	VPANDD       256(SI), Z31, Z4
	VPANDD       320(SI), Z31, Z5
	VPANDD       384(SI), Z31, Z6
	VPANDD       448(SI), Z31, Z7
	VPANDD       512(SI), Z31, Z8
	VPANDD       576(SI), Z31, Z9
	VPANDD       640(SI), Z31, Z10
	VPANDD       704(SI), Z31, Z11
	VPANDD       768(SI), Z31, Z12
	VPANDD       832(SI), Z31, Z13
	VPANDD       896(SI), Z31, Z14
	VPANDD       960(SI), Z31, Z15
	VPMAXUD      Z8, Z0, Z0
	VPMAXUD      Z9, Z1, Z1
	VPMAXUD      Z10, Z2, Z2
	VPMAXUD      Z11, Z3, Z3
	VPMAXUD      Z12, Z4, Z4
	VPMAXUD      Z13, Z5, Z5
	VPMAXUD      Z14, Z6, Z6
	VPMAXUD      Z15, Z7, Z7
	VPMAXUD      Z4, Z0, Z0
	VPMAXUD      Z5, Z1, Z1
	VPMAXUD      Z6, Z2, Z2
	VPMAXUD      Z7, Z3, Z3
	VPMAXUD      Z2, Z0, Z0
	VPMAXUD      Z3, Z1, Z1
	VPMAXUD      Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPMAXUD      Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPMAXUD      X1, X0, X0
	VMOVD        X0, R9
	CMPL         R9, $0x7f800000
	JAE          q8kdone
	CMPL         R9, $0x03800000
	JB           q8kdone
	VPBROADCASTD X0, Z2
	XORQ         R10, R10
q8kfind:
	VPANDD       (SI)(R10*1), Z31, Z3
	VPCMPEQD     Z2, Z3, K1
	KMOVW        K1, R11
	ADDQ         $64, R10
	TESTL        R11, R11
	JZ           q8kfind
	TZCNTL       R11, R11
	LEAQ         -64(SI)(R10*1), R12
	VMOVSS       (R12)(R11*4), X4
	VMOVSS       cm127K<>(SB), X5
	VDIVSS       X4, X5, X5
	VMOVSS       c1K<>(SB), X6
	VDIVSS       X5, X6, X6
	VMOVSS       X6, (R8)(AX*4)
	VBROADCASTSS X5, Z5
	VMULPS       0(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 0(DI)
	VMULPS       64(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 16(DI)
	VMULPS       128(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 32(DI)
	VMULPS       192(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 48(DI)
	VMULPS       256(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 64(DI)
	VMULPS       320(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 80(DI)
	VMULPS       384(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 96(DI)
	VMULPS       448(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 112(DI)
	VMULPS       512(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 128(DI)
	VMULPS       576(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 144(DI)
	VMULPS       640(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 160(DI)
	VMULPS       704(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 176(DI)
	VMULPS       768(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 192(DI)
	VMULPS       832(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 208(DI)
	VMULPS       896(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 224(DI)
	VMULPS       960(SI), Z5, Z6
	VCVTPS2DQ    Z6, Z6
	VPMINSD      Z30, Z6, Z6
	VPMOVDB      Z6, 240(DI)
	ADDQ         $1024, SI
	ADDQ         $256, DI
	INCQ         AX
	JMP          q8kblock
q8kdone:
	MOVQ         AX, ret+32(FP)
	VZEROUPPER
	RET

// quantQ8KAVX2 is quantQ8KAVX512 for CPUs without AVX-512: the same
// operations, each rounded the same way, the quants packed to bytes by
// VPACKSSDW and VPACKSSWB (their saturation is the clamp: VCVTPS2DQ gives
// −127…127 here) and put in order by VPERMD (permQ8, as quantQ8AVX2).

// func quantQ8KAVX2(x *float32, nb int, q *int8, d *float32) int
TEXT ·quantQ8KAVX2(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         q+16(FP), DI
	MOVQ         d+24(FP), R8
	XORQ         AX, AX
	VBROADCASTSS absQ8<>(SB), Y15
	VMOVDQU      permQ8<>(SB), Y13
	VMOVSS       cm127K<>(SB), X12
	VMOVSS       c1K<>(SB), X11

k2block:
	CMPQ    AX, CX
	JGE     k2done
	VANDPS  0(SI), Y15, Y0
	VANDPS  32(SI), Y15, Y1
	VANDPS  64(SI), Y15, Y2
	VANDPS  96(SI), Y15, Y3
	MOVQ    $128, R10

k2max:
	VANDPS  (SI)(R10*1), Y15, Y4
	VPMAXSD Y4, Y0, Y0
	VANDPS  32(SI)(R10*1), Y15, Y4
	VPMAXSD Y4, Y1, Y1
	VANDPS  64(SI)(R10*1), Y15, Y4
	VPMAXSD Y4, Y2, Y2
	VANDPS  96(SI)(R10*1), Y15, Y4
	VPMAXSD Y4, Y3, Y3
	ADDQ    $128, R10
	CMPQ    R10, $1024
	JLT     k2max
	VPMAXSD      Y1, Y0, Y0
	VPMAXSD      Y3, Y2, Y2
	VPMAXSD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXSD      X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPMAXSD      X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPMAXSD      X1, X0, X0
	VMOVD        X0, BX
	SUBL         $0x03800000, BX
	CMPL         BX, $(0x7f800000-0x03800000)
	JAE          k2done

	// max: the first x whose |x| has the largest bits
	VPBROADCASTD X0, Y2
	XORQ         R10, R10

k2find:
	VANDPS    (SI)(R10*1), Y15, Y3
	VPCMPEQD  Y2, Y3, Y3
	VMOVMSKPS Y3, R11
	ADDQ      $32, R10
	TESTL     R11, R11
	JZ        k2find
	TZCNTL    R11, R11
	LEAQ      -32(SI)(R10*1), R9
	VMOVSS    (R9)(R11*4), X4

	// iscale = −127/max, d = 1/iscale
	VDIVSS       X4, X12, X5
	VDIVSS       X5, X11, X6
	VMOVSS       X6, (R8)(AX*4)
	VBROADCASTSS X5, Y5
	XORQ         R10, R10
	XORQ         R9, R9

k2quant:
	VMULPS    (SI)(R10*1), Y5, Y0
	VMULPS    32(SI)(R10*1), Y5, Y1
	VMULPS    64(SI)(R10*1), Y5, Y2
	VMULPS    96(SI)(R10*1), Y5, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y13, Y0
	VMOVDQU   Y0, (DI)(R9*1)
	ADDQ      $128, R10
	ADDQ      $32, R9
	CMPQ      R9, $256
	JLT       k2quant

	ADDQ $1024, SI
	ADDQ $256, DI
	INCQ AX
	JMP  k2block

k2done:
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET
