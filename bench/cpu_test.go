package bench

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and a parenthesis; utime 250, stime 50.
	in := "4242 (kv (le) ase) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1000 0 0\n"
	got, err := parseProcStat([]byte(in))
	if err != nil || got != 3*time.Second {
		t.Errorf("parseProcStat = %v, %v, want 3s", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 -1 2 3"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
	if _, err := procCPU(os.Getpid()); err != nil && runtime.GOOS == "linux" {
		t.Errorf("this process's CPU time: %v", err)
	}
}

func TestParseProcesses(t *testing.T) {
	got, err := ParseProcesses(" p0=12, d0=13,7")
	if err != nil || len(got) != 3 || got[0] != (Process{"p0", 12}) || got[1] != (Process{"d0", 13}) || got[2] != (Process{"7", 7}) {
		t.Errorf("ParseProcesses = %v, %v", got, err)
	}
	for _, bad := range []string{"x=", "x=0", "x=-1", "=3", "abc"} {
		if _, err := ParseProcesses(bad); err == nil {
			t.Errorf("ParseProcesses(%q) succeeded", bad)
		}
	}
}

// TestRunReportsCPU: a run reports its own CPU time and that of the
// processes named, per completed request, and says which it could not
// read.
func TestRunReportsCPU(t *testing.T) {
	f := newFakeServer(t)
	cfg := testConfig(f)
	cfg.Processes = []Process{{Name: "server", PID: os.Getpid()}, {Name: "gone", PID: 1 << 30}}
	res := run(t, cfg)
	cpu := res.Summary.CPU
	if len(cpu) != 3 || cpu[0].Name != "bench" || cpu[1].Name != "server" || cpu[2].Name != "gone" {
		t.Fatalf("cpu %+v", cpu)
	}
	for _, p := range cpu[:2] {
		if runtime.GOOS != "linux" {
			break // CPU times come from /proc: elsewhere each says it is unknown
		}
		if p.Err != "" || p.Seconds < 0 || p.PerRequestMs != p.Seconds*1e3/float64(res.Summary.Completed) {
			t.Errorf("%+v", p)
		}
	}
	if cpu[2].Err == "" {
		t.Errorf("a process that does not exist: %+v", cpu[2])
	}
	var b strings.Builder
	if err := res.Table(&b); err != nil || !strings.Contains(b.String(), "cpu/request") || !strings.Contains(b.String(), "gone (pid 1073741824) unknown") {
		t.Errorf("table:\n%s", b.String())
	}
}
