#include "textflag.h"

// quantQ8AVX2 is quantQ8 (see actKind) over blocks of 32 inputs: the same
// operations, each rounded the same way (VDIVSS, VMULPS, VCVTPS2DQ to
// nearest even, VCVTPS2PH to nearest even). It stops at the first block
// whose largest |x| is below 2^-120 (zero included; 127/amax may overflow
// there) or not finite, which quantQ8 handles, and returns the number of
// blocks done. The largest |x| is the integer maximum of the bits of
// |x|: the float order on finite values, and an infinity or NaN exceeds
// every finite value. u (nil: none) gets q+128 at a stride of 256 bytes
// (acts.u's groups of eight inputs).

DATA absQ8<>+0(SB)/4, $0x7fffffff
GLOBL absQ8<>(SB), RODATA|NOPTR, $4

DATA c127Q8<>+0(SB)/4, $127.0
GLOBL c127Q8<>(SB), RODATA|NOPTR, $4

DATA x80Q8<>+0(SB)/4, $0x80808080
GLOBL x80Q8<>(SB), RODATA|NOPTR, $4

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

// func quantQ8AVX2(x *float32, nb int, q *int8, d, s *float32, u *uint8) int
TEXT ·quantQ8AVX2(SB), NOSPLIT, $0-56
	MOVQ         x+0(FP), SI
	MOVQ         nb+8(FP), CX
	MOVQ         q+16(FP), DI
	MOVQ         d+24(FP), R8
	MOVQ         s+32(FP), R9
	MOVQ         u+40(FP), R10
	XORQ         AX, AX
	VBROADCASTSS absQ8<>(SB), Y15
	VBROADCASTSS x80Q8<>(SB), Y14
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
	TESTQ     R10, R10
	JZ        nou
	VPXOR     Y14, Y0, Y1
	VMOVDQU   Y1, (R10)
	ADDQ      $256, R10

nou:
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
	INCQ AX
	JMP  block

done:
	MOVQ AX, ret+48(FP)
	VZEROUPPER
	RET
