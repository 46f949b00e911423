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

// func dotQ8AVX2(raw *byte, x *float32, nblocks int) float32
//
// A Q8_0 row (nblocks blocks of a float16 scale and 32 int8 quants) times
// x, in dotQ8Generic's order: per block, p_i = q·x for the four groups of 8
// (VMULPS of exact int8→float32 conversions), v = (p0+p1)+(p2+p3),
// acc += d·v (lane-wise), then acc reduced as dot32AVX2 reduces.
TEXT ·dotQ8AVX2(SB), NOSPLIT, $0-28
	MOVQ   raw+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   nblocks+16(FP), CX
	VXORPS Y0, Y0, Y0

qloop:
	MOVWLZX      (SI), AX
	MOVQ         AX, X7
	VCVTPH2PS    X7, X7
	VBROADCASTSS X7, Y7
	VPMOVSXBD    2(SI), Y1
	VCVTDQ2PS    Y1, Y1
	VMULPS       (DI), Y1, Y1
	VPMOVSXBD    10(SI), Y2
	VCVTDQ2PS    Y2, Y2
	VMULPS       32(DI), Y2, Y2
	VPMOVSXBD    18(SI), Y3
	VCVTDQ2PS    Y3, Y3
	VMULPS       64(DI), Y3, Y3
	VPMOVSXBD    26(SI), Y4
	VCVTDQ2PS    Y4, Y4
	VMULPS       96(DI), Y4, Y4
	VADDPS       Y2, Y1, Y1
	VADDPS       Y4, Y3, Y3
	VADDPS       Y3, Y1, Y1
	VMULPS       Y7, Y1, Y1
	VADDPS       Y1, Y0, Y0
	ADDQ         $34, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          qloop

	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET
