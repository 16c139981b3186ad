package sqlledger

// SetRetainBatch makes Retain delete n records per transaction and call
// after once each has committed.
func (s *Store) SetRetainBatch(n int, after func()) { s.retainBatch, s.afterBatch = n, after }

// RetainLock is the advisory lock key Retain's transactions take.
const RetainLock = retainLock
