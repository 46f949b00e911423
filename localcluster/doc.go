// Package localcluster starts a local P/D cluster on loopback (EDGE): prefill
// and decode engines as child processes of the kvlease binary
// ("kvlease serve ..."), sharing a freshly generated cluster secret, and
// the P/D proxy in-process in front of them. `kvlease up`, the benchmark's
// fault scenarios, the demo and end-to-end tests use it.
//
// Start picks free ports, writes the secret to a 0600 file, launches every
// engine with its output in a log file, waits for each engine's /health,
// then serves the proxy. The returned Cluster gives the URLs, reports
// engines that exit when nobody asked them to (Exits), and can Kill, Stop
// or Restart one engine by index — a restarted engine keeps its ports, so
// the proxy routes to it again as soon as it answers. Close stops the proxy
// (requests in flight are drained, then aborted), sends SIGTERM to every
// engine, waits for them (SIGKILL after Options.StopTimeout) and removes
// the secret and any temporary log directory.
//
// Options.Place may move each process (address, ports) and run it under a
// command prefix that execs it in place, such as `ip netns exec NAME`
// (internal/chaos puts each engine in its own network namespace so);
// Options.ProxyProcess runs the proxy as a `kvlease proxy` child too, which
// Kill and Restart then reach at ProxyIndex. Pause and Resume send SIGSTOP
// and SIGCONT.
//
// A Cluster is safe for concurrent use. Start's context bounds only the
// start; the cluster runs until Close.
package localcluster
