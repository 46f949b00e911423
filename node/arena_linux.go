package node

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHugePages marks the page-aligned part of b MADV_HUGEPAGE. The
// advice is a hint: a kernel without transparent huge pages, or one set to
// never, refuses it, and the arena keeps its 4 KiB pages.
func adviseHugePages(b []byte) bool {
	page := uintptr(unix.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	skip := (page - start%page) % page
	if uintptr(len(b)) <= skip+page {
		return false
	}
	rest := b[skip:]
	rest = rest[:uintptr(len(rest))/page*page]
	return unix.Madvise(rest, unix.MADV_HUGEPAGE) == nil
}
