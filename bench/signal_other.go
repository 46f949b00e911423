//go:build !unix

package bench

import "errors"

var errNoStop = errors.New("bench: pausing a process needs SIGSTOP (unix only)")

func signalStop(pid int) error     { return errNoStop }
func signalContinue(pid int) error { return errNoStop }
