package admin

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestEveryAdminCodeIsDocumented: each admin code has its row, with its
// status, in docs/errors.md.
func TestEveryAdminCodeIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	for code, status := range adminStatus {
		if row := fmt.Sprintf("| `%s` | %d |", code, status); !strings.Contains(string(doc), row) {
			t.Errorf("docs/errors.md has no row %q", row)
		}
	}
}
