//go:build !amd64

package llama

import "unsafe"

// packedKernel is the amd64 kernels' signature; no packed layout has a
// kernel here (Weights.Pack leaves the matrices as they are).
type packedKernel func(p *byte, groups, nblocks int, xq *int8, xd *float32, sums unsafe.Pointer, out *float32, outStride int)

func packKernel(Type, int) packedKernel { return nil }
