// Macros of the packed kernels of eight rows per register (packq4k_amd64.s,
// packq8_amd64.s): inputs 0-3 at AX + {0, 1, 2, 3}·DX, 4-7 at R11 + the
// same (R8 = 3·DX); per input one int32 sum per row in Y0-Y7 and one
// float32 result per row in Y16-Y23.

// RX8C(x, W), RX4C(x, W): the inputs' four quants at x (broadcast) times
// the eight rows' four quants in W, into Y0-Y7 (Y0-Y3).
#define RX8C(x, W) \
	RX4C(x, W); \
	VPDPBUSD.BCST x(R11), W, Y4; \
	VPDPBUSD.BCST x(R11)(DX*1), W, Y5; \
	VPDPBUSD.BCST x(R11)(DX*2), W, Y6; \
	VPDPBUSD.BCST x(R11)(R8*1), W, Y7

#define RX4C(x, W) \
	VPDPBUSD.BCST x(AX), W, Y0; \
	VPDPBUSD.BCST x(AX)(DX*1), W, Y1; \
	VPDPBUSD.BCST x(AX)(DX*2), W, Y2; \
	VPDPBUSD.BCST x(AX)(R8*1), W, Y3

// RX8OUT, RX4OUT: each input's eight results to out (out+48(FP) moved
// to the next group's).
#define RX8OUT \
	RX4OUT; \
	VMOVUPS Y20, (SI)(R13*2); \
	LEAQ    (SI)(R13*2), SI; \
	VMOVUPS Y21, (SI)(R13*1); \
	VMOVUPS Y22, (SI)(R13*2); \
	LEAQ    (SI)(R13*2), SI; \
	VMOVUPS Y23, (SI)(R13*1)

#define RX4OUT \
	MOVQ    out+48(FP), SI; \
	MOVQ    outStride+56(FP), R13; \
	SHLQ    $2, R13; \
	ADDQ    $32, out+48(FP); \
	VMOVUPS Y16, (SI); \
	VMOVUPS Y17, (SI)(R13*1); \
	VMOVUPS Y18, (SI)(R13*2); \
	LEAQ    (SI)(R13*2), SI; \
	VMOVUPS Y19, (SI)(R13*1)

