package history

// Shrink returns a minimal subsequence of ops that still fails: it drops
// chunks of operations, halving the chunk size down to single operations,
// while fails holds (delta debugging). Every op is self-contained, so any
// subsequence is a valid history.
func Shrink(ops []Op, fails func([]Op) bool) []Op {
	for size := len(ops) / 2; size >= 1; {
		removed := false
		for i := 0; i+size <= len(ops); {
			try := append(append([]Op(nil), ops[:i]...), ops[i+size:]...)
			if fails(try) {
				ops, removed = try, true
				continue
			}
			i += size
		}
		if !removed || size > len(ops) {
			size /= 2
		}
	}
	return ops
}
