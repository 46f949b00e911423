//go:build unix && !linux

package llamafile

// hugePages: no madvise for huge pages here; b keeps the system's pages.
func hugePages(b []byte) {}
