//go:build !race

package plan

// raceEnabled: this test binary was built with -race.
const raceEnabled = false
