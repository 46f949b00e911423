//go:build !linux

package chaos

import (
	"errors"
	"os"
)

// errNotLinux is what the harness answers elsewhere: its nodes are Linux
// network namespaces and its netem a Linux TUN device.
var errNotLinux = errors.New("chaos: needs Linux (network namespaces, tc, /dev/net/tun)")

const tunName = "kvtun"

func inNamespace(string, func() error) error { return errNotLinux }

func openTun(string) (*os.File, error) { return nil, errNotLinux }
