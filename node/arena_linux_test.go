package node

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvlease/kvlease/kvblock"
)

// resident counts the pages of b that mincore reports in memory.
func resident(t *testing.T, b []byte) (in, pages int) {
	t.Helper()
	page := uintptr(unix.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	skip := (page - start%page) % page
	b = b[skip:]
	b = b[:uintptr(len(b))/page*page]
	vec := make([]byte, uintptr(len(b))/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	for _, v := range vec {
		if v&1 != 0 {
			in++
		}
	}
	return in, len(vec)
}

func TestPrepareKVPopulates(t *testing.T) {
	// 64 MiB: a fresh mapping from the runtime, not yet touched.
	p := kvblock.New(kvblock.Config{NumBlocks: 64, BlockSizeTokens: 16, BytesPerToken: 64 << 10})
	if in, n := resident(t, p.Arena()); in == n {
		t.Skipf("the fresh 64 MiB arena is already resident (%d of %d pages): nothing to observe", in, n)
	}
	PrepareKV(p, true)
	if in, n := resident(t, p.Arena()); in != n {
		t.Fatalf("after PrepareKV(populate) %d of %d arena pages are resident, want all", in, n)
	}
	for i, v := range p.Arena() {
		if v != 0 {
			t.Fatalf("arena byte %d is %d after populating, want 0", i, v)
		}
	}
}

func TestPrepareKVAdvisesHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || !strings.Contains(string(mode), "[madvise]") && !strings.Contains(string(mode), "[always]") {
		t.Skipf("transparent huge pages not offered here (%q, %v)", strings.TrimSpace(string(mode)), err)
	}
	p := kvblock.New(kvblock.Config{NumBlocks: 16, BlockSizeTokens: 16, BytesPerToken: 64 << 10})
	if !PrepareKV(p, false) {
		t.Fatal("PrepareKV: the kernel offers transparent huge pages, but the advice was not taken")
	}
	// The arena's mapping now carries the advice: "hg" in its VmFlags.
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	addr := uint64(uintptr(unsafe.Pointer(&p.Arena()[len(p.Arena())/2])))
	var in bool
	for _, line := range strings.Split(string(smaps), "\n") {
		var lo, hi uint64
		if n, _ := parseMapping(line, &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			if !strings.Contains(line, " hg") {
				t.Fatalf("the arena's mapping has no hg flag: %s", line)
			}
			return
		}
	}
	t.Fatal("the arena's mapping is not in /proc/self/smaps")
}

func TestPrepareKVRefusesAPoolInUse(t *testing.T) {
	p := kvblock.New(kvblock.Config{NumBlocks: 4, BlockSizeTokens: 16, BytesPerToken: 64})
	h := p.NewHold(kvblock.HoldRequest, 1)
	p.Allocate(h, 1)
	defer func() {
		if recover() == nil {
			t.Fatal("PrepareKV on a pool with a held block did not panic")
		}
	}()
	PrepareKV(p, true)
}

// parseMapping reads the address range that starts a mapping's line of
// /proc/self/smaps ("7f01a2c00000-7f01e2c00000 rw-p ..."); n is 2 when the
// line is one.
func parseMapping(line string, lo, hi *uint64) (n int, err error) {
	r, _, ok := strings.Cut(line, " ")
	if !ok {
		return 0, nil
	}
	a, b, ok := strings.Cut(r, "-")
	if !ok {
		return 0, nil
	}
	if *lo, err = strconv.ParseUint(a, 16, 64); err != nil {
		return 0, nil
	}
	if *hi, err = strconv.ParseUint(b, 16, 64); err != nil {
		return 0, nil
	}
	return 2, nil
}
