//go:build kvlease_generic

package llama

// forceGeneric is set by the build tag kvlease_generic: the package then
// uses only its pure-Go kernels (the path of CPUs without AVX2 and FMA and
// of architectures without vector kernels), so that `go test -tags
// kvlease_generic` checks them on any machine.
const forceGeneric = true
