#include "textflag.h"

// func dot32AVX2(w, x *float32, n int) float32
//
// n is a positive multiple of 32. Lane j (0..31) of four 8-wide
// accumulators sums w[k]*x[k] for k ≡ j (mod 32) in increasing k, each
// product rounded to float32 (VMULPS then VADDPS: no fused multiply-add);
// the lanes are combined as dot32Generic does.
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
	VMULPS  (DI), Y4, Y4
	VADDPS  Y4, Y0, Y0
	VMOVUPS 32(SI), Y5
	VMULPS  32(DI), Y5, Y5
	VADDPS  Y5, Y1, Y1
	VMOVUPS 64(SI), Y6
	VMULPS  64(DI), Y6, Y6
	VADDPS  Y6, Y2, Y2
	VMOVUPS 96(SI), Y7
	VMULPS  96(DI), Y7, Y7
	VADDPS  Y7, Y3, Y3
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
