//go:build race

package main

// raceDetector tells whether the race detector is built in: its runtime
// maps memory of its own, which the regions of this test process count
// beside Go's heap (a gateway built for a soak has none).
const raceDetector = true
