package admin

import "net/http"

// Routes returns the pattern and the audit action ("" for a read) of every
// route of h, a handler New returned, in the order New registered them.
func Routes(h http.Handler) [][2]string {
	var out [][2]string
	for _, rt := range h.(*server).routes {
		out = append(out, [2]string{rt.pattern, rt.action})
	}
	return out
}
