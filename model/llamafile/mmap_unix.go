//go:build unix

package llamafile

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// mapFile maps path read-only: the weights stay in the page cache, shared
// by every engine on the machine that serves the same file.
func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size == 0 {
		return nil, nil, fmt.Errorf("%s: empty file", path)
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("%s: %d bytes do not fit in memory", path, size)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

// hugePage is the size of a transparent huge page on the systems that
// have them (2 MiB on x86-64).
const hugePage = 2 << 20

// mapAnon maps n zeroed bytes of anonymous memory, aligned to hugePage and
// marked for transparent huge pages where the system has them
// (hugePages): the packed weights, which a decode step streams whole, so
// that it pays one TLB entry per 2 MiB instead of per 4 KiB.
func mapAnon(n int) ([]byte, func() error, error) {
	b, err := syscall.Mmap(-1, 0, n+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap of %d bytes: %w", n, err)
	}
	off := int(-uintptr(unsafe.Pointer(&b[0])) & (hugePage - 1))
	hugePages(b[off : off+n])
	return b[off : off+n : off+n], func() error { return syscall.Munmap(b) }, nil
}
