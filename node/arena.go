package node

import "github.com/kvlease/kvlease/kvblock"

// PrepareKV readies the pool's KV arena before the engine serves. It asks
// the kernel to back the arena with transparent huge pages where it can
// (Linux, with transparent_hugepage set to madvise or always): a block
// written for the first time then costs one fault per 2 MiB instead of one
// per 4 KiB. With populate it also writes one byte of every page, so that
// no request pays the first touch: the whole arena is resident from the
// start. It returns whether the huge-page advice was taken.
//
// Why: the first pass over a fresh arena is the largest cost of receiving
// KV (docs/benchmarks.md, "KV transfer"): D copies each received block into
// a pool block, and until the arena has been used once every copy faults
// its pages in. Free blocks are reused last-released-first, and cached
// blocks are evicted only when no free one is left, so the first pass
// lasts until the arena is full once.
//
// It is for a pool that has not been used yet (every block free): populate
// writes zeros, which are what a fresh arena holds.
func PrepareKV(p *kvblock.Pool, populate bool) bool {
	if p.NumFree() != p.Capacity() {
		panic("node: PrepareKV on a pool already in use")
	}
	a := p.Arena()
	if len(a) == 0 {
		return false
	}
	huge := adviseHugePages(a)
	if populate {
		const page = 4096
		for i := 0; i < len(a); i += page {
			a[i] = 0
		}
		a[len(a)-1] = 0
	}
	return huge
}
