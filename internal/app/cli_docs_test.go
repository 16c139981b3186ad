package app

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocumentedCommandsExist walks every `sluice <command> [<verb>]` the
// README and docs/ write and checks `sluice help` has it: a documented
// verb the binary answers with "unknown command" fails here.
func TestDocumentedCommandsExist(t *testing.T) {
	var help, errs bytes.Buffer
	if code := Run(context.Background(), []string{"help"}, &help, &errs); code != 0 {
		t.Fatalf("sluice help = exit %d: %s", code, errs.String())
	}
	verbs := map[string]map[string]bool{} // command → its verbs (none: it takes none)
	line := regexp.MustCompile(`(?m)^\s*sluice ([a-z][a-z-]*)(?: ([a-z][a-z|-]*))?`)
	for _, m := range line.FindAllStringSubmatch(help.String(), -1) {
		if verbs[m[1]] == nil {
			verbs[m[1]] = map[string]bool{}
		}
		for v := range strings.SplitSeq(m[2], "|") {
			if v != "" {
				verbs[m[1]][v] = true
			}
		}
	}
	pages, _ := filepath.Glob("../../docs/*.md")
	pages = append(pages, "../../README.md")
	mention := regexp.MustCompile("(?:^|[\\s`$]|cmd/)sluice ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")
	seen := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mention.FindAllStringSubmatch(string(text), -1) {
			command, verb := m[1], m[2]
			known, ok := verbs[command]
			switch {
			case !ok:
				t.Errorf("%s: `sluice %s` is not a command of `sluice help`", filepath.Base(page), command)
			case verb != "" && len(known) > 0 && !known[verb]:
				t.Errorf("%s: `sluice %s %s` is not a verb of `sluice help`", filepath.Base(page), command, verb)
			}
			seen++
		}
	}
	if seen < 20 {
		t.Fatalf("found %d command mentions in the docs; the pattern is broken", seen)
	}
}
