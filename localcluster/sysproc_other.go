//go:build !linux

package localcluster

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
