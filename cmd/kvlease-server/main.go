// Command kvlease-server is kvlease's serving binary, the one the
// container image runs: an engine (serve), the P/D proxy (proxy) and
// version, exactly as kvlease runs them (the same flags and environment
// variables), without the tools (demo, bench, sim, up, chaos) and so
// without their dependencies: no load generator, simulator, plotting,
// fonts or progress bar is linked (TestServerLinksNoTools checks).
package main

import "github.com/kvlease/kvlease/cmd/internal/cli"

// buildVersion may be set with -ldflags "-X main.buildVersion=...".
var buildVersion string

var program = cli.Program{Name: "kvlease-server",
	About: "kvlease-server is kvlease's serving binary (the container image's): the demo, the load generator,\n" +
		"the simulator, the local cluster and the chaos run are commands of kvlease (go run ./cmd/kvlease -h)."}

func main() {
	program.Version = buildVersion
	cli.Main(program)
}
