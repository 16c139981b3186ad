package pipeline

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/capacity"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/store/memstore"
)

// imagesCatalog has an alias of each kind: mixed (a text-only model
// first, a vision model after it), text (text-only models alone), and
// plain (no input declared).
const imagesCatalog = `version: 1
endpoints: [{id: ep, base_url: "http://127.0.0.1:1", protocols: [openai.chat]}]
credentials: [{id: c1, secret_env: UP, endpoints: [ep]}]
models:
  - alias: mixed
    deployments:
      - {model: m-text, endpoints: [ep], input: [text]}
      - {model: m-vision, endpoints: [ep], priority: 1, input: [text, image]}
  - alias: text
    deployments: [{model: m-text, endpoints: [ep], input: [text]}, {model: m-text-2, endpoints: [ep], priority: 1, input: [text]}]
  - alias: plain
    deployments: [{model: m-text, endpoints: [ep]}]
keys: [{id: k, tenant: t, secret_env: K1}]
`

// newImagesHandler is a Handler over catalog with nothing upstream: the
// tests drive its stages by hand.
func newImagesHandler(t *testing.T, catalog string) (*Handler, *Live, *metrics.Metrics) {
	t.Helper()
	live := &Live{}
	live.Swap(compileCatalog(t, catalog, testSecrets))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mem := memstore.New()
	m := metrics.New()
	h := NewHandler(Stages{Live: live, Capacity: capacity.New(mem, mem, "r", time.Minute, log), Statuses: capacity.NewStatuses(mem, log),
		Metrics: m, Log: log, Usage: &records{}})
	return h, live, m
}

// TestImagesRoute: a request with an image goes to the deployments that
// take images only, and is refused (400 naming the part, counted as
// image_input) when none does; a request without, and any request to an
// alias that declares nothing, keeps every edge.
func TestImagesRoute(t *testing.T) {
	h, live, m := newImagesHandler(t, imagesCatalog)
	snap := live.Load()
	const (
		image = `{"model":"%s","messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"text","text":"this?"},{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`
		text  = `{"model":"%s","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`
	)
	tests := []struct {
		name, alias, body string
		want              []string // the models of the edges offered
		refused           string   // the refusal's message; "" = none
	}{
		{"image to mixed", "mixed", image, []string{"m-vision"}, ""},
		{"text to mixed", "mixed", text, []string{"m-text", "m-vision"}, ""},
		{"image to text", "text", image, nil, "messages[1].content[1] is an image, and no deployment of model text takes images"},
		{"text to text", "text", text, []string{"m-text", "m-text-2"}, ""},
		{"image to plain", "plain", image, []string{"m-text"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &sluice.Request{ID: "r", Protocol: sluice.ProtocolOpenAIChat, Model: tt.alias, Received: time.Now(),
				Body: fmt.Appendf(nil, tt.body, tt.alias)}
			p := &passage{}
			h.begin(t.Context(), p, req, &sluice.Principal{Key: snap.StaticKeys[0]})
			var models []string
			for _, e := range p.edges {
				models = append(models, e.Model)
			}
			var serr *sluice.Error
			switch {
			case tt.refused == "" && p.err != nil:
				t.Fatalf("refused: %v", p.err)
			case tt.refused != "" && (!errors.As(p.err, &serr) || serr.Code != sluice.CodeInvalidRequest || serr.Msg != tt.refused):
				t.Fatalf("err = %v, want invalid_request %q", p.err, tt.refused)
			}
			if !slices.Equal(models, tt.want) {
				t.Errorf("edges of models %v, want %v", models, tt.want)
			}
		})
	}
	var counted dto.Metric
	if err := m.RequestsInvalid.WithLabelValues("openai.chat", "image_input").Write(&counted); err != nil || counted.GetCounter().GetValue() != 1 {
		t.Errorf("image_input refusals counted %v (%v), want 1", counted.GetCounter().GetValue(), err)
	}
}

// TestImagesRouteAfterAReload: a request with an image admitted while its
// alias declared nothing, and waiting when a reload makes one of its
// deployments text-only, is offered the vision deployment alone from then on.
func TestImagesRouteAfterAReload(t *testing.T) {
	undeclared := strings.NewReplacer(", input: [text]", "", ", input: [text, image]", "").Replace(imagesCatalog)
	h, live, _ := newImagesHandler(t, undeclared)
	snap := live.Load()
	req := &sluice.Request{ID: "r", Protocol: sluice.ProtocolOpenAIChat, Model: "mixed", Received: time.Now(),
		Body: []byte(`{"model":"mixed","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`)}
	p := &passage{}
	h.begin(t.Context(), p, req, &sluice.Principal{Key: snap.StaticKeys[0]})
	if p.err != nil || len(p.edges) != 2 {
		t.Fatalf("begin = %d edges, %v; want both deployments' and nil", len(p.edges), p.err)
	}
	p.attempts.start(&p.adm, time.Now())
	live.Swap(compileCatalog(t, imagesCatalog, testSecrets))
	p.attempts.plan()
	var models []string
	for _, e := range p.attempts.edges {
		models = append(models, e.Model)
	}
	if !slices.Equal(models, []string{"m-vision"}) {
		t.Errorf("after the reload, edges of models %v, want [m-vision]", models)
	}
}
