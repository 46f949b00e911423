//go:build unix && !linux

package llamafile

// hugePages: no madvise for huge pages here; b keeps the system's pages.
func hugePages(b []byte) {}

// release: no MADV_DONTNEED here; the pages stay mapped (only memory,
// not a wrong byte).
func release(data, b []byte) int { return 0 }
