// NEON instructions Go's arm64 assembler has no mnemonic for (it has
// VFMLA, VLD1, VST1, VEOR, but no floating-point vector FADD, FMUL or
// FADDP), written as their encodings (Arm ARM, "Advanced SIMD three same"
// and "scalar pairwise"). Arguments are register numbers: d is the
// destination, then the sources as the Arm syntax names them.

// FADD Vd.4S, Vn.4S, Vm.4S: d = n + m, lane by lane, each sum rounded.
#define VFADD4(d, n, m) WORD $(0x4E20D400 | ((m)<<16) | ((n)<<5) | (d))

// FMUL Vd.4S, Vn.4S, Vm.4S: d = n × m, lane by lane, each product rounded.
#define VFMUL4(d, n, m) WORD $(0x6E20DC00 | ((m)<<16) | ((n)<<5) | (d))

// FADDP Vd.4S, Vn.4S, Vm.4S: d = [n0+n1, n2+n3, m0+m1, m2+m3].
#define VFADDP4(d, n, m) WORD $(0x6E20D400 | ((m)<<16) | ((n)<<5) | (d))

// FADDP Sd, Vn.2S: lane 0 of d = n0 + n1.
#define FADDP2(d, n) WORD $(0x7E30D800 | ((n)<<5) | (d))

// EXT Vd.16B, Vn.16B, Vn.16B, #8: d = [n2, n3, n0, n1] (Go has VEXT, but
// a macro's register numbers cannot name it).
#define VSWAP64(d, n) WORD $(0x6E004000 | ((n)<<16) | ((n)<<5) | (d))

// HSUM8(lo, hi, t): lane 0 of lo = dot32Generic's last steps over the
// eight lanes v0..v3 (in lo) and v4..v7 (in hi): h_j = v_j + v_{j+4},
// then (h0 + h2) + (h1 + h3). Clobbers lo and t.
#define HSUM8(lo, hi, t) \
	VFADD4(lo, lo, hi); \
	VSWAP64(t, lo); \
	VFADD4(lo, lo, t); \
	FADDP2(lo, lo)

// HSUM32(a0, …, a7, t): lane 0 of a0 = dot32Generic's tree over the 32
// lanes a0..a7 hold (lanes 4r..4r+3 in ar): v_j = (l_j + l_{8+j}) +
// (l_{16+j} + l_{24+j}), then HSUM8. Clobbers a0..a7 and t.
#define HSUM32(a0, a1, a2, a3, a4, a5, a6, a7, t) \
	VFADD4(a0, a0, a2); \
	VFADD4(a4, a4, a6); \
	VFADD4(a0, a0, a4); \
	VFADD4(a1, a1, a3); \
	VFADD4(a5, a5, a7); \
	VFADD4(a1, a1, a5); \
	HSUM8(a0, a1, t)

// ZERO4(a, b, c, d): four registers (given as Vn.B16) set to +0.
#define ZERO4(a, b, c, d) \
	VEOR a, a, a; \
	VEOR b, b, b; \
	VEOR c, c, c; \
	VEOR d, d, d

// FCVTL Vd.4S, Vn.4H: four float16 values widened to float32 (exact).
#define VFCVTL4(d, n) WORD $(0x0E217800 | ((n)<<5) | (d))

// SCVTF Vd.4S, Vn.4S: int32 lanes to float32 (exact below 2^24).
#define VSCVTF4(d, n) WORD $(0x4E21D800 | ((n)<<5) | (d))

// SDOT Vd.4S, Vn.16B, Vm.16B (the DotProd extension): lane j of d +=
// Σ n_u·m_u over the bytes u = 4j..4j+3, as signed integers.
#define VSDOT(d, n, m) WORD $(0x4E809400 | ((m)<<16) | ((n)<<5) | (d))

// SMULL Vd.8H, Vn.8B, Vm.8B and SMULL2 Vd.8H, Vn.16B, Vm.16B: the signed
// products of the low (high) eight bytes, as int16 (exact: |p| ≤ 2^14).
#define VSMULL(d, n, m) WORD $(0x0E20C000 | ((m)<<16) | ((n)<<5) | (d))
#define VSMULL2(d, n, m) WORD $(0x4E20C000 | ((m)<<16) | ((n)<<5) | (d))

// SADDLP Vd.4S, Vn.8H: d = [n0+n1, n2+n3, n4+n5, n6+n7] as int32.
#define VSADDLP4(d, n) WORD $(0x4E602800 | ((n)<<5) | (d))

// EOR Vd.16B, Vd.16B, Vd.16B: d = 0 (VEOR, for a macro's register number).
#define VZERO(d) WORD $(0x6E201C00 | ((d)<<16) | ((d)<<5) | (d))

// MLA Vd.4S, Vn.4S, Vm.4S: d += n × m, int32 lanes.
#define VMLA4(d, n, m) WORD $(0x4EA09400 | ((m)<<16) | ((n)<<5) | (d))

// MUL Vd.4S, Vn.4S, Vm.4S: d = n × m, int32 lanes.
#define VMUL4(d, n, m) WORD $(0x4EA09C00 | ((m)<<16) | ((n)<<5) | (d))
