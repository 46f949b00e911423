package llama

// Blocking of the prompt kernels. A tile's inputs for one block of columns
// stay in L1 while the tile walks the chunk's rows; the accumulators of
// the chunk's rows × one block of inputs live in the worker's scratch
// between blocks of columns (a reduction's lanes, not its result: the
// order is unchanged).
const (
	tileMinInputs = 6   // fewer: the batched kernels (mulF32, mulQ8)
	tileF32Inputs = 60  // inputs per block, a multiple of 3
	tileF32Cols   = 512 // columns per block, a multiple of 32
	tileQ8Inputs  = 60  // a multiple of 6
	tileQ8Blocks  = 16  // Q8_0 blocks of columns per block
)
