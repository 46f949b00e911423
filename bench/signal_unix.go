//go:build unix

package bench

import "syscall"

// signalStop and signalContinue hang and resume the process pid (an
// engine is a single process, the leader of its own group).
func signalStop(pid int) error     { return syscall.Kill(pid, syscall.SIGSTOP) }
func signalContinue(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
