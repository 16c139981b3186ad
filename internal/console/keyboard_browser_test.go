package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// consolePages are the routes of the navigation, in its order.
var consolePages = []string{"overview", "accounts", "keys", "money", "usage", "entitlements", "jobs", "audit", "catalog"}

// TestBrowserKeyboardReachesEverything: with the keyboard alone, the first
// Tab reaches the skip link; every page opens from the navigation with
// Tab and Enter; and on each page, Tab reaches every visible control
// (link, button, field) in turn — nothing is a mouse-only target.
func TestBrowserKeyboardReachesEverything(t *testing.T) {
	g := startGateway(t)
	ctx := newBrowser(t)
	signIn(t, ctx, g, writeToken)
	// A fresh load starts the focus at the top of the document.
	run(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#nav a[aria-current="page"]`)))
	run(t, ctx, "first Tab", chromedp.KeyEvent(kb.Tab))
	if cls := eval[string](t, ctx, `document.activeElement.className`); cls != "skip" {
		t.Errorf("the first Tab focuses %q, want the skip link", cls)
	}
	for _, page := range consolePages {
		link := fmt.Sprintf(`#nav a[href="#/%s"]`, page)
		tabTo(t, ctx, link, 40)
		run(t, ctx, "Enter on "+page, chromedp.KeyEvent(kb.Enter))
		waitText(t, ctx, `#nav a[aria-current="page"]`, eval[string](t, ctx, `document.querySelector('`+link+`').textContent`), testWait)
		run(t, ctx, "page "+page+" drawn", chromedp.WaitNotPresent(chromedp.CSS(`#page .loading`)))

		// Mark every visible control of the page, then Tab through the
		// whole document once and see which were reached.
		// The page draws its data when it arrives: wait until the count
		// of controls holds still for half a second.
		mark := `(() => {
			const els = [...document.querySelectorAll('#page a[href], #page button, #page input, #page select, #page textarea, #page summary')]
				.filter(e => e.offsetParent !== null && !e.disabled && e.tabIndex >= 0);
			els.forEach((e, i) => e.dataset.kb = i);
			return els.length;
		})()`
		n := -1
		for still := 0; still < 5; {
			run(t, ctx, "settle", chromedp.Sleep(100*time.Millisecond))
			if m := eval[int](t, ctx, mark); m == n {
				still++
			} else {
				n, still = m, 0
			}
		}
		t.Logf("%s: %d controls", page, n)
		reached := map[string]bool{}
		eval[bool](t, ctx, `document.activeElement.blur(); true`)
		for range n + 40 {
			run(t, ctx, "Tab", chromedp.KeyEvent(kb.Tab))
			if k := eval[string](t, ctx, `document.activeElement.dataset.kb || ''`); k != "" {
				reached[k] = true
			}
			if len(reached) == n {
				break
			}
		}
		if len(reached) < n {
			missed := eval[string](t, ctx, `[...document.querySelectorAll('#page [data-kb]')].filter(e => !`+
				fmt.Sprintf("%q", keys(reached))+`.split(',').includes(e.dataset.kb)).map(e => e.outerHTML.slice(0, 80)).join('\n')`)
			t.Errorf("%s: Tab reached %d of its %d controls; not:\n%s", page, len(reached), n, missed)
		}
	}
}

// tabTo presses Tab until the element of sel has the focus, at most limit
// times.
func tabTo(t *testing.T, ctx context.Context, sel string, limit int) {
	t.Helper()
	for range limit {
		if eval[bool](t, ctx, `document.activeElement === document.querySelector('`+sel+`')`) {
			return
		}
		run(t, ctx, "Tab", chromedp.KeyEvent(kb.Tab))
	}
	t.Fatalf("%d Tabs did not reach %s", limit, sel)
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(out, ",")
}
