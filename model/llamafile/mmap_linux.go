package llamafile

import (
	"syscall"
	"unsafe"
)

// hugePages asks Linux for transparent huge pages behind b (madvise: the
// default setting of /sys/kernel/mm/transparent_hugepage/enabled backs
// only the memory asked for). A kernel without them refuses, and b keeps
// its 4 KiB pages: only slower, so the error is not returned.
func hugePages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) }

// release gives back to the system this process's pages of b, a part of
// the file's mapping data (nothing when it is not: never other memory),
// and returns how many bytes: the whole pages inside b. The mapping is
// shared and read-only, so the bytes stay the file's: a later read
// faults them back in from the page cache.
func release(data, b []byte) int {
	if len(b) == 0 || len(data) == 0 {
		return 0
	}
	d0, b0 := uintptr(unsafe.Pointer(&data[0])), uintptr(unsafe.Pointer(&b[0]))
	if b0 < d0 || b0+uintptr(len(b)) > d0+uintptr(len(data)) {
		return 0
	}
	page := uintptr(syscall.Getpagesize())
	lo := (b0 - d0 + page - 1) &^ (page - 1)
	hi := (b0 - d0 + uintptr(len(b))) &^ (page - 1)
	if hi <= lo {
		return 0
	}
	if syscall.Madvise(data[lo:hi], syscall.MADV_DONTNEED) != nil {
		return 0
	}
	return int(hi - lo)
}
