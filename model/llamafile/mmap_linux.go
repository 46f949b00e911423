package llamafile

import "syscall"

// hugePages asks Linux for transparent huge pages behind b (madvise: the
// default setting of /sys/kernel/mm/transparent_hugepage/enabled backs
// only the memory asked for). A kernel without them refuses, and b keeps
// its 4 KiB pages: only slower, so the error is not returned.
func hugePages(b []byte) { _ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) }
