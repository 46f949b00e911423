//go:build race

package wire

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
