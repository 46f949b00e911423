// Command kvlease is the one command of kvlease: an engine (serve), a P/D
// proxy (proxy), a local cluster (up), a load generator (bench), the demo
// (demo), the deterministic cluster simulator (sim) and the chaos run
// (chaos).
//
// The serving commands and the rules every command's flags follow are in
// cmd/internal/cli, shared with cmd/kvlease-server (the container image's
// binary, without the tools); the tools live here, each in its own file,
// registering itself in init.
package main

import "github.com/kvlease/kvlease/cmd/internal/cli"

// buildVersion may be set with -ldflags "-X main.buildVersion=...".
var buildVersion string

var program = cli.Program{Name: "kvlease"}

func main() {
	program.Version = buildVersion
	cli.Main(program)
}
