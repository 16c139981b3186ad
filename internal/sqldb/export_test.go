package sqldb

import "context"

// OpenAt opens url as a build whose latest migration is version left it.
func OpenAt(ctx context.Context, url string, version int64) (*DB, error) {
	return open(ctx, url, version)
}
