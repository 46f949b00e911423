// Package race reports whether the race detector is on (go build -race,
// go test -race), as the standard library's internal/race does.
//
// Tests use it to run smaller sizes of their long single-goroutine loops
// (swarm seeds, random operations against a model, simulated workloads)
// under the detector, which makes such code 10 to 20 times slower and finds
// nothing in it that the same test without the detector would not: they
// still run, and still assert the same things. Nothing else may depend on
// it.
//
// Pure: no imports.
package race
