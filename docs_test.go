package sluice_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsLinksStayInTheRepository checks every Markdown link of the
// README and docs/: it must point to a file of the repository (no link
// leaves it), and an anchor must name a heading of the page it points to.
func TestDocsLinksStayInTheRepository(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		text := readPage(t, page)
		for _, m := range link.FindAllStringSubmatch(withoutCode(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				t.Errorf("%s: link %s leaves the repository", page, target)
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %s: %v", page, target, err)
					continue
				}
			}
			if anchor != "" && !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %s: an anchor into a file that is not Markdown", page, target)
			} else if anchor != "" && !headingAnchors(readPage(t, dest))[anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", page, target, dest, anchor)
			}
		}
	}
}

func readPage(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// withoutCode drops fenced blocks and indented code, where brackets are
// not links.
func withoutCode(text string) string {
	var out []string
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") {
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "")
}

// headingAnchors are the anchors a Markdown renderer gives the page's
// headings: lower case, punctuation dropped, spaces as hyphens.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	for line := range strings.Lines(withoutCode(text)) {
		if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
			anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")] = true
		}
	}
	return anchors
}
