//go:build race

package race

// Enabled is true: this binary was built with -race.
const Enabled = true
