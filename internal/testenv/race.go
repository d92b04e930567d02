//go:build race

package testenv

// RaceDetector reports whether the test binary was built with -race.
const RaceDetector = true
