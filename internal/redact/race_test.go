//go:build race

package redact

// raceDetector tells whether the race detector is built in: it changes
// what allocates (sync.Pool, used by regexp, drops a random share of what
// is put back), so allocation counts taken with it are not the real ones.
const raceDetector = true
