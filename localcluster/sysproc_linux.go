package localcluster

import "syscall"

// sysProcAttr puts an engine in its own process group, so a Ctrl-C at the
// terminal reaches only the launcher, which stops the proxy first and then
// the engines; and makes the engine receive SIGTERM if the launcher dies
// without stopping it, so a crashed `kvlease up` or test leaves no engines
// behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
