//go:build !race

package main

// raceDetector tells whether the race detector is built in (see
// race_test.go).
const raceDetector = false
