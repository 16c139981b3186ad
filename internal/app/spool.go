package app

import (
	"strings"

	"github.com/sluicehq/sluice/internal/sqldb"
)

// spoolDir is where usage records wait until the database has them: the
// catalog's database.spool_dir, else next to an SQLite file, else
// data/spool; none for an SQLite database in memory, which a dead process
// loses anyway. The default is worked out here, not in config.ApplyDefaults,
// because it follows the database URL actually used, which Options may
// override.
func spoolDir(configured, dbURL string) string {
	if configured != "" {
		return configured
	}
	if file := sqldb.File(dbURL); file != "" {
		return file + "-spool"
	}
	if strings.HasPrefix(dbURL, "sqlite:") {
		return "" // in memory
	}
	return "data/spool"
}
