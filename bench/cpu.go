package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Process names a process whose CPU time a run reports per request: an
// engine, a proxy, any server of the stack under load on this machine.
type Process struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
}

// ProcessCPU is the CPU time (user and system) a process used during the
// load, and per completed request: on a shared machine, a fairer figure
// than requests per second to compare two stacks by.
type ProcessCPU struct {
	Name    string  `json:"name"`
	PID     int     `json:"pid"`
	Seconds float64 `json:"cpu_s"`
	// PerRequestMs is Seconds in milliseconds per completed request (0
	// when none completed).
	PerRequestMs float64 `json:"cpu_ms_per_request"`
	// Err says why the figure is missing (the process was gone).
	Err string `json:"error,omitempty"`
}

// userHZ is the unit of the times in /proc/<pid>/stat: clock ticks of
// 1/100 s on every Linux architecture's userspace ABI.
const userHZ = 100

// procCPU returns the CPU time pid used so far, from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStat(b)
}

// parseProcStat reads utime and stime (fields 14 and 15) from the text of
// /proc/<pid>/stat. The command name (field 2) is in parentheses and may
// hold spaces and parentheses itself: fields are counted after its last
// ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc stat %q: no command name", b)
	}
	f := strings.Fields(string(b[i+1:])) // from field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc stat: %d fields after the name, want 13 or more", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bench: /proc stat: bad time %q", s)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuMeter takes the CPU time of processes at the start and end of a load.
type cpuMeter struct {
	procs []Process
	start []time.Duration
	errs  []error
}

// startCPU reads the processes' CPU time now: the bench process itself
// first (named self), then procs.
func startCPU(self string, procs []Process) *cpuMeter {
	m := &cpuMeter{procs: append([]Process{{Name: self, PID: os.Getpid()}}, procs...)}
	m.start = make([]time.Duration, len(m.procs))
	m.errs = make([]error, len(m.procs))
	for i, p := range m.procs {
		m.start[i], m.errs[i] = procCPU(p.PID)
	}
	return m
}

// finish returns each process's CPU time since startCPU.
func (m *cpuMeter) finish() []ProcessCPU {
	out := make([]ProcessCPU, len(m.procs))
	for i, p := range m.procs {
		out[i] = ProcessCPU{Name: p.Name, PID: p.PID}
		end, err := procCPU(p.PID)
		if err == nil {
			err = m.errs[i]
		}
		if err != nil {
			out[i].Err = err.Error()
			continue
		}
		out[i].Seconds = (end - m.start[i]).Seconds()
	}
	return out
}

// perRequest fills in the CPU milliseconds per completed request.
func perRequest(cpu []ProcessCPU, completed int) []ProcessCPU {
	for i := range cpu {
		if completed > 0 && cpu[i].Err == "" {
			cpu[i].PerRequestMs = cpu[i].Seconds * 1e3 / float64(completed)
		}
	}
	return cpu
}

// ParseProcesses parses NAME=PID[,NAME=PID...] (a bare PID is named by
// itself).
func ParseProcesses(s string) ([]Process, error) {
	var out []Process
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, pidText, ok := strings.Cut(part, "=")
		if !ok {
			name, pidText = part, part
		}
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || name == "" {
			return nil, fmt.Errorf("%q: want NAME=PID with a positive PID", part)
		}
		out = append(out, Process{Name: name, PID: pid})
	}
	return out, nil
}
