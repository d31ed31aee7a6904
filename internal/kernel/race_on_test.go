//go:build race

package kernel

// raceEnabled: this test binary was built with -race.
const raceEnabled = true
