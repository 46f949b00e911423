//go:build !linux

package node

// adviseHugePages has no portable equivalent outside Linux: the arena keeps
// the pages the runtime gave it.
func adviseHugePages([]byte) bool { return false }
