// Package chaos runs a P/D cluster across real network namespaces and
// injects real faults into it (EDGE: it runs ip, tc and the kvlease
// binary, as root). Each engine and the proxy get their own namespace
// ("node") with its own address on a private bridge (10.213.S.0/24, no
// route out); engines advertise that address, so every P/D hand-off
// crosses real interfaces and real TCP.
//
// Faults are tc on a node's link: silent drops (Cut, Partition, Isolate:
// no RST reaches either side), random loss (Lossy) and a bandwidth cap
// (Slow); netem's faults on a node's link (Impair: delay with jitter,
// loss, reordering, duplication, corruption), made in userspace by
// package netem between TUN devices; and process faults through package
// cluster: kill -9, SIGSTOP / SIGCONT, SIGTERM, restart, the proxy
// killed. The workload goes through
// the proxy and every answer is compared with a single `--role both`
// engine; the checks read only /metrics and answers: release reasons,
// fallbacks, and after the faults heal no active lease, no held block, no
// request left.
//
// The kernel this was written on has no netem (CONFIG_NET_SCH_NETEM is
// off), so every node also has a TUN device (kvtun) whose file the
// harness holds. Impair moves the routes between a node and the other
// nodes onto those devices (same addresses: open connections carry on,
// and the root namespace still reaches the node over the bridge), and
// the harness's forwarder applies the fault to each packet, drawn from
// the run's seed, before writing it to the destination's device. The
// kernels on either side see real loss, reordering, duplicates and
// corrupted segments (dropped by their checksums, counted in
// /proc/net/snmp). Lossy is the other way to lose packets: a classic-BPF
// tc classifier on the kernel's random number.
//
// Namespaces are named kvc-<pid>-<run>-<node>; Close removes them, a
// SIGINT or SIGTERM to the harness removes them before the process dies,
// and a later run removes those of runs whose process is gone (kill -9).
// The TUN devices go with the harness's files, however it ends.
package chaos
