package jsonfield

// Elements calls fn with the span [start, end) of each element of arr, a
// JSON array known to be well-formed (part of a value Members checked, or
// a body ingress read); anything else than an array has none. It skips
// values by their quotes and brackets without checking them, and does not
// allocate.
func Elements(arr []byte, fn func(start, end int)) {
	if len(arr) < 2 || arr[0] != '[' {
		return
	}
	depth, inString, escaped, start := 0, false, false, 1
	for i := 1; i < len(arr); i++ {
		c := arr[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
		case depth > 0 && (c == '}' || c == ']'):
			depth--
		case depth == 0 && (c == ',' || c == ']'):
			s := skipSpace(arr, start)
			e := i
			for e > s && (arr[e-1] == ' ' || arr[e-1] == '\t' || arr[e-1] == '\n' || arr[e-1] == '\r') {
				e--
			}
			if e > s {
				fn(s, e)
			}
			start = i + 1
		}
	}
}
