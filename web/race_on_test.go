//go:build race

package web_test

// raceEnabled reports whether the race detector is on, which allocates
// on its own account: counts of allocations mean nothing then.
const raceEnabled = true
