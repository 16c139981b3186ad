//go:build race

package bench

// raceDetector tells whether the race detector is built in: it changes
// what allocates (sync.Pool drops a random share of what is put back), so
// allocation counts taken with it are not the gateway's.
const raceDetector = true
