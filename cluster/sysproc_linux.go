package cluster

import "syscall"

// sysProcAttr makes an engine receive SIGTERM if this process dies without
// stopping it, so a crashed `kvlease up` or test leaves no engines behind.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} }
