package console_test

import (
	"encoding/json"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/console"
)

// Literal message keys in the console's code: t('key' …) in scripts,
// data-i18n="key" and data-i18n-attr="attr:key;…" in markup.
var (
	scriptKey = regexp.MustCompile(`\bt\(\s*'([^'$]+)'`)
	markupKey = regexp.MustCompile(`data-i18n="([^"]+)"`)
	attrKeys  = regexp.MustCompile(`data-i18n-attr="([^"]+)"`)
)

// TestEveryMessageInBothLanguages: each language has the same keys, none
// empty, and every key the code names is in them, so no visible string is
// missing in either language. (Keys built from data, such as an error
// code's name, cannot be found here; pages show such values as they are
// when the catalog lacks them.)
func TestEveryMessageInBothLanguages(t *testing.T) {
	catalogs := map[string]map[string]string{}
	for _, lang := range []string{"en", "zh"} {
		catalogs[lang] = map[string]string{}
		files, err := fs.Glob(console.Assets, "i18n/"+lang+"/*.json")
		if err != nil || len(files) == 0 {
			t.Fatalf("no catalogs for %s: %v", lang, err)
		}
		for _, f := range files {
			var m map[string]string
			b, _ := fs.ReadFile(console.Assets, f)
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			area := strings.TrimSuffix(f[strings.LastIndex(f, "/")+1:], ".json")
			for k, v := range m {
				if !strings.HasPrefix(k, area+".") {
					t.Errorf("%s: key %q outside its area %q", f, k, area)
				}
				if strings.TrimSpace(v) == "" {
					t.Errorf("%s: %q is empty", f, k)
				}
				catalogs[lang][k] = v
			}
		}
	}
	en, zh := slices.Sorted(maps.Keys(catalogs["en"])), slices.Sorted(maps.Keys(catalogs["zh"]))
	for _, k := range en {
		if _, ok := catalogs["zh"][k]; !ok {
			t.Errorf("%q is in English only", k)
		}
	}
	for _, k := range zh {
		if _, ok := catalogs["en"][k]; !ok {
			t.Errorf("%q is in Chinese only", k)
		}
	}

	used := map[string]string{} // key → file naming it
	err := fs.WalkDir(console.Assets, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(name, ".js") || strings.HasSuffix(name, ".html")) {
			return err
		}
		b, _ := fs.ReadFile(console.Assets, name)
		for _, m := range scriptKey.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = name
		}
		if !strings.HasSuffix(name, ".html") {
			return nil // scripts name keys only through t
		}
		for _, m := range markupKey.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = name
		}
		for _, m := range attrKeys.FindAllStringSubmatch(string(b), -1) {
			for pair := range strings.SplitSeq(m[1], ";") {
				_, key, _ := strings.Cut(pair, ":")
				used[key] = name
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(used) < 20 {
		t.Fatalf("found %d message keys in the code, want the console's", len(used))
	}
	for k, file := range used {
		if _, ok := catalogs["en"][k]; !ok {
			t.Errorf("%s names %q, which the catalogs lack", file, k)
		}
	}
}
