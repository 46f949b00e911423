#include "textflag.h"

// func dot32AVX2(w, x *float32, n int) float32
//
// n is a positive multiple of 32. Lane j (0..31) of four 8-wide
// accumulators accumulates w[k]*x[k] for k ≡ j (mod 32) in increasing k,
// each step one fused multiply-add (VFMADD231PS, rounded once: fma32's
// bits); the lanes are combined as dot32Generic does.
TEXT ·dot32AVX2(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

loop:
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	VMOVUPS 32(SI), Y5
	VFMADD231PS 32(DI), Y5, Y1
	VMOVUPS 64(SI), Y6
	VFMADD231PS 64(DI), Y6, Y2
	VMOVUPS 96(SI), Y7
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JNZ     loop

	VADDPS       Y1, Y0, Y0 // a0 + a1
	VADDPS       Y3, Y2, Y2 // a2 + a3
	VADDPS       Y2, Y0, Y0 // v = (a0+a1) + (a2+a3)
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0 // h4[j] = v[j] + v[j+4]
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0 // h2[j] = h4[j] + h4[j+2]
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0 // h2[0] + h2[1]
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func dotF32x8AVX2(w *float32, rows, n int, x *float32, out *float32, outStride int)
//
// out[r*outStride+i] = row i of w (rows rows of n floats, n a positive
// multiple of 32) times x vector r (x + r*n), for r < 8: dot32Generic's
// order. Each lane group g (lanes 8g..8g+7 of the 32) is one pass over
// the row: every 8 weights are loaded once and multiplied into 8
// accumulators (VFMADD231PS, as dot32AVX2 steps a lane); the frame keeps
// a0+a1 and a2 until pass 3 gives v = (a0+a1) + (a2+a3), reduced as
// dot32AVX2 reduces.
TEXT ·dotF32x8AVX2(SB), 0, $512-48
	MOVQ w+0(FP), SI
	MOVQ rows+8(FP), BX
	MOVQ n+16(FP), DX
	SHLQ $2, DX // row and vector stride in bytes
	MOVQ x+24(FP), DI
	MOVQ out+32(FP), R12
	MOVQ outStride+40(FP), R13
	SHLQ $2, R13
	LEAQ (DX)(DX*2), R8
	LEAQ (DX)(DX*4), R9
	LEAQ (R8)(DX*4), R10
	MOVQ DX, R14
	SHLQ $4, R14

f8row:
	LEAQ 0(DI), AX
	LEAQ 0(SI), CX
	MOVQ DX, R11
	SHRQ $7, R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f8pass0:
	PREFETCHT0 (CX)(DX*1) // the next row
	PREFETCHT0 64(CX)(DX*1)
	VMOVUPS (CX), Y8
	VFMADD231PS (AX), Y8, Y0
	VFMADD231PS (AX)(DX*1), Y8, Y1
	VFMADD231PS (AX)(DX*2), Y8, Y2
	VFMADD231PS (AX)(R8*1), Y8, Y3
	VFMADD231PS (AX)(DX*4), Y8, Y4
	VFMADD231PS (AX)(R9*1), Y8, Y5
	VFMADD231PS (AX)(R8*2), Y8, Y6
	VFMADD231PS (AX)(R10*1), Y8, Y7
	ADDQ    $128, AX
	ADDQ    $128, CX
	DECQ    R11
	JNZ     f8pass0

	VMOVUPS Y0, 0(SP) // a0
	VMOVUPS Y1, 32(SP)
	VMOVUPS Y2, 64(SP)
	VMOVUPS Y3, 96(SP)
	VMOVUPS Y4, 128(SP)
	VMOVUPS Y5, 160(SP)
	VMOVUPS Y6, 192(SP)
	VMOVUPS Y7, 224(SP)

	LEAQ 32(DI), AX
	LEAQ 32(SI), CX
	MOVQ DX, R11
	SHRQ $7, R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f8pass1:
	PREFETCHT1 (CX)(R14*1) // sixteen rows ahead, into L2
	PREFETCHT1 64(CX)(R14*1)
	VMOVUPS (CX), Y8
	VFMADD231PS (AX), Y8, Y0
	VFMADD231PS (AX)(DX*1), Y8, Y1
	VFMADD231PS (AX)(DX*2), Y8, Y2
	VFMADD231PS (AX)(R8*1), Y8, Y3
	VFMADD231PS (AX)(DX*4), Y8, Y4
	VFMADD231PS (AX)(R9*1), Y8, Y5
	VFMADD231PS (AX)(R8*2), Y8, Y6
	VFMADD231PS (AX)(R10*1), Y8, Y7
	ADDQ    $128, AX
	ADDQ    $128, CX
	DECQ    R11
	JNZ     f8pass1

	VADDPS  0(SP), Y0, Y0
	VMOVUPS Y0, 0(SP) // a0+a1
	VADDPS  32(SP), Y1, Y1
	VMOVUPS Y1, 32(SP)
	VADDPS  64(SP), Y2, Y2
	VMOVUPS Y2, 64(SP)
	VADDPS  96(SP), Y3, Y3
	VMOVUPS Y3, 96(SP)
	VADDPS  128(SP), Y4, Y4
	VMOVUPS Y4, 128(SP)
	VADDPS  160(SP), Y5, Y5
	VMOVUPS Y5, 160(SP)
	VADDPS  192(SP), Y6, Y6
	VMOVUPS Y6, 192(SP)
	VADDPS  224(SP), Y7, Y7
	VMOVUPS Y7, 224(SP)

	LEAQ 64(DI), AX
	LEAQ 64(SI), CX
	MOVQ DX, R11
	SHRQ $7, R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f8pass2:
	VMOVUPS (CX), Y8
	VFMADD231PS (AX), Y8, Y0
	VFMADD231PS (AX)(DX*1), Y8, Y1
	VFMADD231PS (AX)(DX*2), Y8, Y2
	VFMADD231PS (AX)(R8*1), Y8, Y3
	VFMADD231PS (AX)(DX*4), Y8, Y4
	VFMADD231PS (AX)(R9*1), Y8, Y5
	VFMADD231PS (AX)(R8*2), Y8, Y6
	VFMADD231PS (AX)(R10*1), Y8, Y7
	ADDQ    $128, AX
	ADDQ    $128, CX
	DECQ    R11
	JNZ     f8pass2

	VMOVUPS Y0, 256(SP) // a2
	VMOVUPS Y1, 288(SP)
	VMOVUPS Y2, 320(SP)
	VMOVUPS Y3, 352(SP)
	VMOVUPS Y4, 384(SP)
	VMOVUPS Y5, 416(SP)
	VMOVUPS Y6, 448(SP)
	VMOVUPS Y7, 480(SP)

	LEAQ 96(DI), AX
	LEAQ 96(SI), CX
	MOVQ DX, R11
	SHRQ $7, R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

f8pass3:
	VMOVUPS (CX), Y8
	VFMADD231PS (AX), Y8, Y0
	VFMADD231PS (AX)(DX*1), Y8, Y1
	VFMADD231PS (AX)(DX*2), Y8, Y2
	VFMADD231PS (AX)(R8*1), Y8, Y3
	VFMADD231PS (AX)(DX*4), Y8, Y4
	VFMADD231PS (AX)(R9*1), Y8, Y5
	VFMADD231PS (AX)(R8*2), Y8, Y6
	VFMADD231PS (AX)(R10*1), Y8, Y7
	ADDQ    $128, AX
	ADDQ    $128, CX
	DECQ    R11
	JNZ     f8pass3

	VADDPS  256(SP), Y0, Y0 // a2+a3
	VADDPS  0(SP), Y0, Y0 // (a0+a1)+(a2+a3)
	VADDPS  288(SP), Y1, Y1
	VADDPS  32(SP), Y1, Y1
	VADDPS  320(SP), Y2, Y2
	VADDPS  64(SP), Y2, Y2
	VADDPS  352(SP), Y3, Y3
	VADDPS  96(SP), Y3, Y3
	VADDPS  384(SP), Y4, Y4
	VADDPS  128(SP), Y4, Y4
	VADDPS  416(SP), Y5, Y5
	VADDPS  160(SP), Y5, Y5
	VADDPS  448(SP), Y6, Y6
	VADDPS  192(SP), Y6, Y6
	VADDPS  480(SP), Y7, Y7
	VADDPS  224(SP), Y7, Y7

	MOVQ R12, AX
	VEXTRACTF128 $1, Y0, X8
	VADDPS       X8, X0, X0
	VMOVHLPS     X0, X0, X8
	VADDPS       X8, X0, X0
	VMOVSHDUP    X0, X8
	VADDSS       X8, X0, X0
	VMOVSS       X0, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y1, X8
	VADDPS       X8, X1, X1
	VMOVHLPS     X1, X1, X8
	VADDPS       X8, X1, X1
	VMOVSHDUP    X1, X8
	VADDSS       X8, X1, X1
	VMOVSS       X1, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y2, X8
	VADDPS       X8, X2, X2
	VMOVHLPS     X2, X2, X8
	VADDPS       X8, X2, X2
	VMOVSHDUP    X2, X8
	VADDSS       X8, X2, X2
	VMOVSS       X2, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y3, X8
	VADDPS       X8, X3, X3
	VMOVHLPS     X3, X3, X8
	VADDPS       X8, X3, X3
	VMOVSHDUP    X3, X8
	VADDSS       X8, X3, X3
	VMOVSS       X3, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y4, X8
	VADDPS       X8, X4, X4
	VMOVHLPS     X4, X4, X8
	VADDPS       X8, X4, X4
	VMOVSHDUP    X4, X8
	VADDSS       X8, X4, X4
	VMOVSS       X4, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y5, X8
	VADDPS       X8, X5, X5
	VMOVHLPS     X5, X5, X8
	VADDPS       X8, X5, X5
	VMOVSHDUP    X5, X8
	VADDSS       X8, X5, X5
	VMOVSS       X5, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y6, X8
	VADDPS       X8, X6, X6
	VMOVHLPS     X6, X6, X8
	VADDPS       X8, X6, X6
	VMOVSHDUP    X6, X8
	VADDSS       X8, X6, X6
	VMOVSS       X6, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y7, X8
	VADDPS       X8, X7, X7
	VMOVHLPS     X7, X7, X8
	VADDPS       X8, X7, X7
	VMOVSHDUP    X7, X8
	VADDSS       X8, X7, X7
	VMOVSS       X7, (AX)
	ADDQ DX, SI
	ADDQ $4, R12
	DECQ BX
	JNZ  f8row
	VZEROUPPER
	RET

// func dotF32x4AVX2(w *float32, rows, n int, x *float32, out *float32, outStride int)
//
// out[r*outStride+i] = row i of w (rows rows of n floats, n a positive
// multiple of 32) times x vector r (x + r*n), for r < 4: dot32Generic's
// order. Each lane group g (lanes 8g..8g+7 of the 32) is one pass over
// the row: every 8 weights are loaded once and multiplied into 4
// accumulators (VFMADD231PS, as dot32AVX2 steps a lane); the frame keeps
// a0+a1 and a2 until pass 3 gives v = (a0+a1) + (a2+a3), reduced as
// dot32AVX2 reduces.
TEXT ·dotF32x4AVX2(SB), 0, $256-48
	MOVQ w+0(FP), SI
	MOVQ rows+8(FP), BX
	MOVQ n+16(FP), DX
	SHLQ $2, DX // row and vector stride in bytes
	MOVQ x+24(FP), DI
	MOVQ out+32(FP), R12
	MOVQ outStride+40(FP), R13
	SHLQ $2, R13
	LEAQ (DX)(DX*2), R8
	LEAQ (DX)(DX*4), R9
	LEAQ (R8)(DX*4), R10
	MOVQ DX, R14
	SHLQ $4, R14

f4row:
	LEAQ 0(DI), AX
	LEAQ 0(SI), CX
	MOVQ DX, R11
	SHRQ $7, R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

f4pass0:
	PREFETCHT0 (CX)(DX*1) // the next row
	PREFETCHT0 64(CX)(DX*1)
	VMOVUPS (CX), Y8
	VFMADD231PS (AX), Y8, Y0
	VFMADD231PS (AX)(DX*1), Y8, Y1
	VFMADD231PS (AX)(DX*2), Y8, Y2
	VFMADD231PS (AX)(R8*1), Y8, Y3
	ADDQ    $128, AX
	ADDQ    $128, CX
	DECQ    R11
	JNZ     f4pass0

	VMOVUPS Y0, 0(SP) // a0
	VMOVUPS Y1, 32(SP)
	VMOVUPS Y2, 64(SP)
	VMOVUPS Y3, 96(SP)

	LEAQ 32(DI), AX
	LEAQ 32(SI), CX
	MOVQ DX, R11
	SHRQ $7, R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

f4pass1:
	PREFETCHT1 (CX)(R14*1) // sixteen rows ahead, into L2
	PREFETCHT1 64(CX)(R14*1)
	VMOVUPS (CX), Y8
	VFMADD231PS (AX), Y8, Y0
	VFMADD231PS (AX)(DX*1), Y8, Y1
	VFMADD231PS (AX)(DX*2), Y8, Y2
	VFMADD231PS (AX)(R8*1), Y8, Y3
	ADDQ    $128, AX
	ADDQ    $128, CX
	DECQ    R11
	JNZ     f4pass1

	VADDPS  0(SP), Y0, Y0
	VMOVUPS Y0, 0(SP) // a0+a1
	VADDPS  32(SP), Y1, Y1
	VMOVUPS Y1, 32(SP)
	VADDPS  64(SP), Y2, Y2
	VMOVUPS Y2, 64(SP)
	VADDPS  96(SP), Y3, Y3
	VMOVUPS Y3, 96(SP)

	LEAQ 64(DI), AX
	LEAQ 64(SI), CX
	MOVQ DX, R11
	SHRQ $7, R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

f4pass2:
	VMOVUPS (CX), Y8
	VFMADD231PS (AX), Y8, Y0
	VFMADD231PS (AX)(DX*1), Y8, Y1
	VFMADD231PS (AX)(DX*2), Y8, Y2
	VFMADD231PS (AX)(R8*1), Y8, Y3
	ADDQ    $128, AX
	ADDQ    $128, CX
	DECQ    R11
	JNZ     f4pass2

	VMOVUPS Y0, 128(SP) // a2
	VMOVUPS Y1, 160(SP)
	VMOVUPS Y2, 192(SP)
	VMOVUPS Y3, 224(SP)

	LEAQ 96(DI), AX
	LEAQ 96(SI), CX
	MOVQ DX, R11
	SHRQ $7, R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

f4pass3:
	VMOVUPS (CX), Y8
	VFMADD231PS (AX), Y8, Y0
	VFMADD231PS (AX)(DX*1), Y8, Y1
	VFMADD231PS (AX)(DX*2), Y8, Y2
	VFMADD231PS (AX)(R8*1), Y8, Y3
	ADDQ    $128, AX
	ADDQ    $128, CX
	DECQ    R11
	JNZ     f4pass3

	VADDPS  128(SP), Y0, Y0 // a2+a3
	VADDPS  0(SP), Y0, Y0 // (a0+a1)+(a2+a3)
	VADDPS  160(SP), Y1, Y1
	VADDPS  32(SP), Y1, Y1
	VADDPS  192(SP), Y2, Y2
	VADDPS  64(SP), Y2, Y2
	VADDPS  224(SP), Y3, Y3
	VADDPS  96(SP), Y3, Y3

	MOVQ R12, AX
	VEXTRACTF128 $1, Y0, X8
	VADDPS       X8, X0, X0
	VMOVHLPS     X0, X0, X8
	VADDPS       X8, X0, X0
	VMOVSHDUP    X0, X8
	VADDSS       X8, X0, X0
	VMOVSS       X0, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y1, X8
	VADDPS       X8, X1, X1
	VMOVHLPS     X1, X1, X8
	VADDPS       X8, X1, X1
	VMOVSHDUP    X1, X8
	VADDSS       X8, X1, X1
	VMOVSS       X1, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y2, X8
	VADDPS       X8, X2, X2
	VMOVHLPS     X2, X2, X8
	VADDPS       X8, X2, X2
	VMOVSHDUP    X2, X8
	VADDSS       X8, X2, X2
	VMOVSS       X2, (AX)
	ADDQ         R13, AX
	VEXTRACTF128 $1, Y3, X8
	VADDPS       X8, X3, X3
	VMOVHLPS     X3, X3, X8
	VADDPS       X8, X3, X3
	VMOVSHDUP    X3, X8
	VADDSS       X8, X3, X3
	VMOVSS       X3, (AX)
	ADDQ DX, SI
	ADDQ $4, R12
	DECQ BX
	JNZ  f4row
	VZEROUPPER
	RET

// func scoresAVX(out *float32, count int, k *float32, stride int, q *float32, n int)
//
// out[i] = dot4(k + i·stride, q) for i < count, n a positive multiple of
// 4: lane j of a 4-wide accumulator sums the products of index j mod 4 in
// increasing index (VMULPS then VADDPS), then (l0+l1)+(l2+l3). Four slots
// at a time, each with its own accumulator, so that their chains of adds
// overlap; then the rest one by one.
TEXT ·scoresAVX(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), R8
	MOVQ count+8(FP), BX
	MOVQ k+16(FP), SI
	MOVQ stride+24(FP), DX
	SHLQ $2, DX
	MOVQ q+32(FP), DI
	MOVQ n+40(FP), CX
	LEAQ (DX)(DX*2), R11 // 3 strides
	CMPQ BX, $4
	JLT  scone

scfour:
	LEAQ (SI)(DX*4), R12 // the next four slots, into L1: a slot
	MOVQ CX, R13         // is a stride away from the one before,
	SHLQ $2, R13         // too far for the hardware prefetcher

scpf:
	PREFETCHT0 (R12)
	PREFETCHT0 (R12)(DX*1)
	PREFETCHT0 (R12)(DX*2)
	PREFETCHT0 (R12)(R11*1)
	ADDQ       $64, R12
	SUBQ       $64, R13
	JGT        scpf

	VXORPS X0, X0, X0
	VXORPS X1, X1, X1
	VXORPS X2, X2, X2
	VXORPS X3, X3, X3
	MOVQ   SI, AX
	MOVQ   DI, R9
	MOVQ   CX, R10

scfourloop:
	VMOVUPS (R9), X4
	VMULPS  (AX), X4, X5
	VADDPS  X5, X0, X0
	VMULPS  (AX)(DX*1), X4, X6
	VADDPS  X6, X1, X1
	VMULPS  (AX)(DX*2), X4, X7
	VADDPS  X7, X2, X2
	VMULPS  (AX)(R11*1), X4, X8
	VADDPS  X8, X3, X3
	ADDQ    $16, AX
	ADDQ    $16, R9
	SUBQ    $4, R10
	JNZ     scfourloop

	VMOVSHDUP X0, X5
	VADDPS    X5, X0, X0 // l0+l1, ·, l2+l3, ·
	VMOVHLPS  X0, X0, X5
	VADDSS    X5, X0, X0
	VMOVSS    X0, (R8)
	VMOVSHDUP X1, X5
	VADDPS    X5, X1, X1
	VMOVHLPS  X1, X1, X5
	VADDSS    X5, X1, X1
	VMOVSS    X1, 4(R8)
	VMOVSHDUP X2, X5
	VADDPS    X5, X2, X2
	VMOVHLPS  X2, X2, X5
	VADDSS    X5, X2, X2
	VMOVSS    X2, 8(R8)
	VMOVSHDUP X3, X5
	VADDPS    X5, X3, X3
	VMOVHLPS  X3, X3, X5
	VADDSS    X5, X3, X3
	VMOVSS    X3, 12(R8)
	ADDQ      $16, R8
	LEAQ      (SI)(DX*4), SI
	SUBQ      $4, BX
	CMPQ      BX, $4
	JGE       scfour

scone:
	TESTQ BX, BX
	JZ    scdone

sconeslot:
	VXORPS X0, X0, X0
	MOVQ   SI, AX
	MOVQ   DI, R9
	MOVQ   CX, R10

sconeloop:
	VMOVUPS (AX), X1
	VMULPS  (R9), X1, X1
	VADDPS  X1, X0, X0
	ADDQ    $16, AX
	ADDQ    $16, R9
	SUBQ    $4, R10
	JNZ     sconeloop

	VMOVSHDUP X0, X1
	VADDPS    X1, X0, X0
	VMOVHLPS  X0, X0, X1
	VADDSS    X1, X0, X0
	VMOVSS    X0, (R8)
	ADDQ      $4, R8
	ADDQ      DX, SI
	DECQ      BX
	JNZ       sconeslot

scdone:
	RET

// func wsumAVX2(out *float32, n int, a *float32, count int, v *float32, stride int)
//
// out[d] += a[i]·v[i·stride + d] for i = 0..count-1 in turn, d < n (a
// positive multiple of 8): 32 (then 8) elements of out stay in registers
// while the positions go by, so that four chains of adds overlap; each
// product is rounded (VMULPS), then added.
TEXT ·wsumAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ a+16(FP), R11
	MOVQ count+24(FP), BX
	MOVQ v+32(FP), SI
	MOVQ stride+40(FP), DX
	SHLQ $2, DX

wsquad:
	CMPQ    CX, $32 // 32 elements of out in four registers, four
	JLT     wschunk // chains of adds that overlap
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	MOVQ    SI, AX
	MOVQ    R11, R9
	MOVQ    BX, R10

wsqloop:
	PREFETCHT0   (AX)(DX*8) // eight positions ahead
	PREFETCHT0   64(AX)(DX*8)
	VBROADCASTSS (R9), Y4
	VMULPS       (AX), Y4, Y5
	VADDPS       Y5, Y0, Y0
	VMULPS       32(AX), Y4, Y6
	VADDPS       Y6, Y1, Y1
	VMULPS       64(AX), Y4, Y7
	VADDPS       Y7, Y2, Y2
	VMULPS       96(AX), Y4, Y8
	VADDPS       Y8, Y3, Y3
	ADDQ         $4, R9
	ADDQ         DX, AX
	DECQ         R10
	JNZ          wsqloop

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	SUBQ    $32, CX
	JNZ     wsquad
	VZEROUPPER
	RET

wschunk:
	VMOVUPS (DI), Y0
	MOVQ    SI, AX
	MOVQ    R11, R9
	MOVQ    BX, R10

wsloop:
	PREFETCHT0   (AX)(DX*8) // eight positions ahead
	VBROADCASTSS (R9), Y1
	VMULPS       (AX), Y1, Y1
	VADDPS       Y1, Y0, Y0
	ADDQ         $4, R9
	ADDQ         DX, AX
	DECQ         R10
	JNZ          wsloop

	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JNZ     wschunk
	VZEROUPPER
	RET

// func dotF32x1AVX2(w *float32, rows, n int, x *float32, out *float32)
//
// out[i] = row i of w (rows rows of n floats, n a positive multiple of 32)
// times x, each row as dot32AVX2 computes it; the row loop is here, the
// rows one stream for the hardware's prefetchers (software prefetches two
// and sixteen rows ahead made TinyLlama F32 decode slower: 4.07, 4.29 ->
// 5.28, 5.33 tok/cpu-s without them, one thread, load 2.5-3).
TEXT ·dotF32x1AVX2(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ rows+8(FP), BX
	MOVQ n+16(FP), DX
	SHLQ $2, DX
	MOVQ x+24(FP), DI
	MOVQ out+32(FP), R12

x1row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   DI, AX
	MOVQ   DX, CX

x1loop:
	VMOVUPS    (SI), Y4
	VFMADD231PS (AX), Y4, Y0
	VMOVUPS    32(SI), Y5
	VFMADD231PS 32(AX), Y5, Y1
	VMOVUPS    64(SI), Y6
	VFMADD231PS 64(AX), Y6, Y2
	VMOVUPS    96(SI), Y7
	VFMADD231PS 96(AX), Y7, Y3
	ADDQ       $128, SI
	ADDQ       $128, AX
	SUBQ       $128, CX
	JNZ        x1loop

	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, (R12)
	ADDQ         $4, R12
	DECQ         BX
	JNZ          x1row
	VZEROUPPER
	RET

// func fma32FMA(a, b, c float32) float32
TEXT ·fma32FMA(SB), NOSPLIT, $0-20
	MOVSS       a+0(FP), X1
	MOVSS       b+4(FP), X2
	MOVSS       c+8(FP), X0
	VFMADD231SS X2, X1, X0 // X0 = X1·X2 + X0, rounded once
	MOVSS       X0, ret+16(FP)
	RET

// func dotF32x8AVX512(w *float32, rows, n int, x *float32, out *float32, outStride int)
//
// dotF32x8AVX2 with 512-bit registers: vector r's 32 lanes are two
// accumulators (lanes 0-15 and 16-31), so the eight vectors' lanes all
// stay in registers and a row is one pass; every 32 weights are loaded
// once for the eight vectors. Each lane steps by VFMADD231PS as in
// dot32AVX2, and the lanes are combined in its tree: (l[j]+l[8+j]) +
// (l[16+j]+l[24+j]), then as dot32AVX2 reduces. The same bits.
TEXT ·dotF32x8AVX512(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ rows+8(FP), BX
	MOVQ n+16(FP), DX
	SHLQ $2, DX // row and vector stride in bytes
	MOVQ x+24(FP), DI
	MOVQ out+32(FP), R12
	MOVQ outStride+40(FP), R13
	SHLQ $2, R13
	LEAQ (DX)(DX*2), R8
	LEAQ (DX)(DX*4), R9
	LEAQ (R8)(DX*4), R10
	MOVQ DX, R14
	SHLQ $4, R14

z8row:
	MOVQ   DI, AX
	MOVQ   SI, CX
	MOVQ   DX, R11
	SHRQ   $7, R11
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

z8loop:
	PREFETCHT0  (CX)(DX*1) // the next row
	PREFETCHT0  64(CX)(DX*1)
	PREFETCHT1  (CX)(R14*1) // sixteen rows ahead, into L2
	PREFETCHT1  64(CX)(R14*1)
	VMOVUPS     (CX), Z16
	VMOVUPS     64(CX), Z17
	VFMADD231PS (AX), Z16, Z0
	VFMADD231PS 64(AX), Z17, Z1
	VFMADD231PS (AX)(DX*1), Z16, Z2
	VFMADD231PS 64(AX)(DX*1), Z17, Z3
	VFMADD231PS (AX)(DX*2), Z16, Z4
	VFMADD231PS 64(AX)(DX*2), Z17, Z5
	VFMADD231PS (AX)(R8*1), Z16, Z6
	VFMADD231PS 64(AX)(R8*1), Z17, Z7
	VFMADD231PS (AX)(DX*4), Z16, Z8
	VFMADD231PS 64(AX)(DX*4), Z17, Z9
	VFMADD231PS (AX)(R9*1), Z16, Z10
	VFMADD231PS 64(AX)(R9*1), Z17, Z11
	VFMADD231PS (AX)(R8*2), Z16, Z12
	VFMADD231PS 64(AX)(R8*2), Z17, Z13
	VFMADD231PS (AX)(R10*1), Z16, Z14
	VFMADD231PS 64(AX)(R10*1), Z17, Z15
	ADDQ        $128, AX
	ADDQ        $128, CX
	DECQ        R11
	JNZ         z8loop

	MOVQ R12, AX
	VEXTRACTF64X4 $1, Z0, Y16
	VADDPS        Z16, Z0, Z0 // lanes 0-7: l[j] + l[8+j]
	VEXTRACTF64X4 $1, Z1, Y17
	VADDPS        Z17, Z1, Z1 // l[16+j] + l[24+j]
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VADDSS        X1, X0, X0
	VMOVSS        X0, (AX)
	ADDQ          R13, AX
	VEXTRACTF64X4 $1, Z2, Y16
	VADDPS        Z16, Z2, Z2 // lanes 0-7: l[j] + l[8+j]
	VEXTRACTF64X4 $1, Z3, Y17
	VADDPS        Z17, Z3, Z3 // l[16+j] + l[24+j]
	VADDPS        Y3, Y2, Y2
	VEXTRACTF128  $1, Y2, X3
	VADDPS        X3, X2, X2
	VMOVHLPS      X2, X2, X3
	VADDPS        X3, X2, X2
	VMOVSHDUP     X2, X3
	VADDSS        X3, X2, X2
	VMOVSS        X2, (AX)
	ADDQ          R13, AX
	VEXTRACTF64X4 $1, Z4, Y16
	VADDPS        Z16, Z4, Z4 // lanes 0-7: l[j] + l[8+j]
	VEXTRACTF64X4 $1, Z5, Y17
	VADDPS        Z17, Z5, Z5 // l[16+j] + l[24+j]
	VADDPS        Y5, Y4, Y4
	VEXTRACTF128  $1, Y4, X5
	VADDPS        X5, X4, X4
	VMOVHLPS      X4, X4, X5
	VADDPS        X5, X4, X4
	VMOVSHDUP     X4, X5
	VADDSS        X5, X4, X4
	VMOVSS        X4, (AX)
	ADDQ          R13, AX
	VEXTRACTF64X4 $1, Z6, Y16
	VADDPS        Z16, Z6, Z6 // lanes 0-7: l[j] + l[8+j]
	VEXTRACTF64X4 $1, Z7, Y17
	VADDPS        Z17, Z7, Z7 // l[16+j] + l[24+j]
	VADDPS        Y7, Y6, Y6
	VEXTRACTF128  $1, Y6, X7
	VADDPS        X7, X6, X6
	VMOVHLPS      X6, X6, X7
	VADDPS        X7, X6, X6
	VMOVSHDUP     X6, X7
	VADDSS        X7, X6, X6
	VMOVSS        X6, (AX)
	ADDQ          R13, AX
	VEXTRACTF64X4 $1, Z8, Y16
	VADDPS        Z16, Z8, Z8 // lanes 0-7: l[j] + l[8+j]
	VEXTRACTF64X4 $1, Z9, Y17
	VADDPS        Z17, Z9, Z9 // l[16+j] + l[24+j]
	VADDPS        Y9, Y8, Y8
	VEXTRACTF128  $1, Y8, X9
	VADDPS        X9, X8, X8
	VMOVHLPS      X8, X8, X9
	VADDPS        X9, X8, X8
	VMOVSHDUP     X8, X9
	VADDSS        X9, X8, X8
	VMOVSS        X8, (AX)
	ADDQ          R13, AX
	VEXTRACTF64X4 $1, Z10, Y16
	VADDPS        Z16, Z10, Z10 // lanes 0-7: l[j] + l[8+j]
	VEXTRACTF64X4 $1, Z11, Y17
	VADDPS        Z17, Z11, Z11 // l[16+j] + l[24+j]
	VADDPS        Y11, Y10, Y10
	VEXTRACTF128  $1, Y10, X11
	VADDPS        X11, X10, X10
	VMOVHLPS      X10, X10, X11
	VADDPS        X11, X10, X10
	VMOVSHDUP     X10, X11
	VADDSS        X11, X10, X10
	VMOVSS        X10, (AX)
	ADDQ          R13, AX
	VEXTRACTF64X4 $1, Z12, Y16
	VADDPS        Z16, Z12, Z12 // lanes 0-7: l[j] + l[8+j]
	VEXTRACTF64X4 $1, Z13, Y17
	VADDPS        Z17, Z13, Z13 // l[16+j] + l[24+j]
	VADDPS        Y13, Y12, Y12
	VEXTRACTF128  $1, Y12, X13
	VADDPS        X13, X12, X12
	VMOVHLPS      X12, X12, X13
	VADDPS        X13, X12, X12
	VMOVSHDUP     X12, X13
	VADDSS        X13, X12, X12
	VMOVSS        X12, (AX)
	ADDQ          R13, AX
	VEXTRACTF64X4 $1, Z14, Y16
	VADDPS        Z16, Z14, Z14 // lanes 0-7: l[j] + l[8+j]
	VEXTRACTF64X4 $1, Z15, Y17
	VADDPS        Z17, Z15, Z15 // l[16+j] + l[24+j]
	VADDPS        Y15, Y14, Y14
	VEXTRACTF128  $1, Y14, X15
	VADDPS        X15, X14, X14
	VMOVHLPS      X14, X14, X15
	VADDPS        X15, X14, X14
	VMOVSHDUP     X14, X15
	VADDSS        X15, X14, X14
	VMOVSS        X14, (AX)
	ADDQ DX, SI
	ADDQ $4, R12
	DECQ BX
	JNZ  z8row
	VPXORD Z16, Z16, Z16 // leave no dirty upper halves
	VPXORD Z17, Z17, Z17
	VZEROUPPER
	RET
