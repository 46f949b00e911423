//go:build !kvlease_generic

package llama

// forceGeneric is false without the build tag kvlease_generic: the
// vector kernels run where the CPU has them.
const forceGeneric = false
