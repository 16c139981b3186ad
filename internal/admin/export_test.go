package admin

import (
	"net/http"
	"time"
)

// Routes returns the pattern and the audit action ("" for a read) of every
// route of h, a handler New returned, in the order New registered them.
func Routes(h http.Handler) [][2]string {
	var out [][2]string
	for _, rt := range h.(*server).routes {
		out = append(out, [2]string{rt.pattern, rt.action})
	}
	return out
}

// SetClock makes h, a handler New returned, read the time from now.
func SetClock(h http.Handler, now func() time.Time) { h.(*server).now = now }
