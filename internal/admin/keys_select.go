package admin

import (
	"slices"

	"github.com/sluicehq/sluice"
)

// selectedKeys keeps the keys whose labels match selector (the grammar of
// POST /admin/keys/batch), so that a list shows exactly the keys a batch
// on the same selector would touch.
func selectedKeys(selector string, keys []*sluice.Key) ([]*sluice.Key, error) {
	sel, err := parseSelector(selector)
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

// pageAfter is the page of at most limit keys after the key ID after ("":
// from the first), and the after of the next page ("" when none follows).
func pageAfter(keys []*sluice.Key, after string, limit int) (page []*sluice.Key, next string, err error) {
	from := 0
	if after != "" {
		i := slices.IndexFunc(keys, func(k *sluice.Key) bool { return k.ID == after })
		if i < 0 {
			return nil, "", invalid("after %q is not the ID of a key that matches the selector", after)
		}
		from = i + 1
	}
	page = keys[from:min(from+limit, len(keys))]
	if from+limit < len(keys) {
		next = page[len(page)-1].ID
	}
	return page, next, nil
}
