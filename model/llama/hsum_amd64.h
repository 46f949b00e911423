// HSUM(Y, X, T): X[0] = hsum8 of Y's eight lanes (Y's low half is X),
// (h0+h2)+(h1+h3) with h_j = a_j + a_{j+4}; clobbers T.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VMOVHLPS X, X, T; \
	VADDPS T, X, X; \
	VMOVSHDUP X, T; \
	VADDSS T, X, X
