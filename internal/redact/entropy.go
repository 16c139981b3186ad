package redact

import "math"

// entropy is the Shannon entropy, in bits per character, of a string of n
// characters whose counts are freq.
func entropy(freq []uint16, n int) float64 {
	var h float64
	for _, f := range freq {
		if f > 0 {
			p := float64(f) / float64(n)
			h -= p * math.Log2(p)
		}
	}
	return h
}
