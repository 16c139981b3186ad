package admin

import (
	"net/http"

	"github.com/sluicehq/sluice"
)

// selectedKeys keeps the keys whose labels match the request's ?selector=
// (the grammar of POST /admin/keys/batch), so that a list shows exactly the
// keys a batch on the same selector would touch; without one, every key.
func selectedKeys(r *http.Request, keys []*sluice.Key) ([]*sluice.Key, error) {
	q := r.URL.Query()
	if !q.Has("selector") {
		return keys, nil
	}
	sel, err := parseSelector(q.Get("selector"))
	if err != nil {
		return nil, err
	}
	out := keys[:0:0]
	for _, k := range keys {
		if sel.matches(k.Labels) {
			out = append(out, k)
		}
	}
	return out, nil
}
