package chaos

import "syscall"

// sysProcAttr puts the reference engine in its own process group and
// makes it receive SIGTERM if the harness dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
