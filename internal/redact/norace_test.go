//go:build !race

package redact

// raceDetector tells whether the race detector is built in (see
// race_test.go).
const raceDetector = false
