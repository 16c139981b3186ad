package sluice

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestEveryCodeIsDocumented: each public code has its row, with its
// status, in docs/errors.md.
func TestEveryCodeIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	for code, status := range codeStatus {
		if row := fmt.Sprintf("| `%s` | %d |", code, status); !strings.Contains(string(doc), row) {
			t.Errorf("docs/errors.md has no row %q", row)
		}
	}
}
