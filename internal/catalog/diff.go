package catalog

import (
	"fmt"

	"github.com/aymanbagabas/go-udiff"
)

// Diff returns the unified line diff from the document from (version
// fromVersion; 0 = none) to the document to (version toVersion), with three
// lines of context, and how many lines it adds and removes. Equal
// documents give "" and zero counts. Stores call it to record each
// version's diff; the admin API calls it to compare any two versions. The
// error is the diff module's, for edits it made inconsistent: a bug.
func Diff(from, to []byte, fromVersion, toVersion int64) (diff string, added, removed int, err error) {
	before := string(from)
	u, err := udiff.ToUnifiedDiff(versionLabel(fromVersion), versionLabel(toVersion), before,
		udiff.Lines(before, string(to)), udiff.DefaultContextLines)
	if err != nil {
		return "", 0, 0, fmt.Errorf("diff catalog versions %d and %d: %w", fromVersion, toVersion, err)
	}
	for _, h := range u.Hunks {
		for _, l := range h.Lines {
			switch l.Kind {
			case udiff.Insert:
				added++
			case udiff.Delete:
				removed++
			}
		}
	}
	return u.String(), added, removed, nil
}

func versionLabel(v int64) string {
	if v == 0 {
		return "/dev/null"
	}
	return fmt.Sprintf("catalog@%d", v)
}
