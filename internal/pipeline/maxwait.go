package pipeline

import (
	"time"

	"github.com/sluicehq/sluice"
)

// waitFor is how long req may wait for capacity: its class's wait, or the
// caller's X-Sluice-Max-Wait when shorter. With 0 the request tries once
// and, refused, is answered at once with capacity_wait_timeout and the
// wait it would have had (see capacity.Engine.Wait), so a worker can defer
// its job rather than hold a connection.
func waitFor(classWait time.Duration, req *sluice.Request) time.Duration {
	if req.MaxWait != nil {
		return min(*req.MaxWait, classWait)
	}
	return classWait
}
