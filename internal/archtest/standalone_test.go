package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideDocument matches a citation of a document that is not in the
// repository: the design notes and reference pages the project was
// started from, by name wherever it stands (our own docs/ take other
// names, so a citation of one can never be mistaken for the other). What
// the code relies on is described under docs/, and a reader of a fresh
// clone must be able to follow every citation.
var outsideDocument = regexp.MustCompile(`\.\./shared|\b(DESIGN|CONVENTIONS|translation|upstream-errors|openai|anthropic|gemini|async-jobs|capacity|redis|observability|clients)\.md\b`)

// TestCitesOnlyItsOwnDocuments fails when a tracked file (code, docs,
// scripts, catalogs) cites a document outside the repository.
func TestCitesOnlyItsOwnDocuments(t *testing.T) {
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	dir := strings.TrimSpace(string(root))
	files, err := exec.Command("git", "-C", dir, "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	self := filepath.Join("internal", "archtest", "standalone_test.go")
	for _, name := range strings.Fields(string(files)) {
		if name == self || strings.Contains(name, "/testdata/") {
			continue
		}
		switch filepath.Ext(name) {
		case ".go", ".md", ".yaml", ".yml", ".sh", ".lua":
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := outsideDocument.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, which is not in the repository: describe it under docs/", name, i+1, strings.TrimSpace(m))
			}
		}
	}
}
