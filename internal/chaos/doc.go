// Package chaos runs a P/D cluster across real network namespaces and
// injects real faults into it (EDGE: it runs ip, tc and the kvlease
// binary, as root). Each engine and the proxy get their own namespace
// ("node") with its own address on a private bridge (10.213.S.0/24, no
// route out); engines advertise that address, so every P/D hand-off
// crosses real interfaces and real TCP.
//
// Faults are tc on a node's link: silent drops (Cut, Partition, Isolate:
// no RST reaches either side), random loss (Lossy) and a bandwidth cap
// (Slow); and process faults through package cluster: kill -9, SIGSTOP /
// SIGCONT, SIGTERM, restart, the proxy killed. The workload goes through
// the proxy and every answer is compared with a single `--role both`
// engine; the checks read only /metrics and answers: release reasons,
// fallbacks, and after the faults heal no active lease, no held block, no
// request left.
//
// The kernel this was written on has no netem (CONFIG_NET_SCH_NETEM is
// off): delay, jitter, reordering and duplication are out of reach, and
// loss is a classic-BPF tc classifier on the kernel's random number
// instead of netem's loss.
//
// Namespaces are named kvc-<pid>-<run>-<node>; Close removes them, a
// SIGINT or SIGTERM to the harness removes them before the process dies,
// and a later run removes those of runs whose process is gone (kill -9).
package chaos
