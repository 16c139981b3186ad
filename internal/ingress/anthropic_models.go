package ingress

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
)

// anthropicCaller reports whether a GET of /v1/models or /v1/models/{id},
// paths OpenAI's API has too, is an Anthropic client's: Anthropic's SDKs
// and Claude Code send anthropic-version with every request, OpenAI's
// clients never do.
func anthropicCaller(r *http.Request) bool { return r.Header.Get("Anthropic-Version") != "" }

// anthropicModel is one entry of Anthropic's model list.
type anthropicModel struct {
	Type        string    `json:"type"` // always "model"
	ID          string    `json:"id"`
	DisplayName string    `json:"display_name"`
	CreatedAt   time.Time `json:"created_at"`
}

// anthropicModels is Anthropic's GET /v1/models (id "") or GET
// /v1/models/{id}: the aliases the key may call through Messages, in one
// page, or one of them (404 not_found_error for another). An alias has no
// creation date: the Unix epoch stands for it.
func (s *Server) anthropicModels(w http.ResponseWriter, r *http.Request, id string) {
	p, err := s.keys.Authenticate(anthropicKey(r))
	if err != nil {
		s.writeError(w, sluice.ProtocolAnthropic, asError(closeUnread(w, r, err)))
		return
	}
	data := []anthropicModel{}
	snap := s.live.Load()
	routes, k := snap.Routes, snap.ScopedKey(p.Key)
	for _, name := range routes.Names() {
		if callable(k, routes.Alias(name), sluice.ProtocolAnthropic) && (id == "" || id == name) {
			data = append(data, anthropicModel{Type: "model", ID: name, DisplayName: name, CreatedAt: time.Unix(0, 0).UTC()})
		}
	}
	switch {
	case id == "":
		page := struct {
			Data    []anthropicModel `json:"data"`
			HasMore bool             `json:"has_more"`
			FirstID *string          `json:"first_id"`
			LastID  *string          `json:"last_id"`
		}{Data: data}
		if len(data) > 0 {
			page.FirstID, page.LastID = &data[0].ID, &data[len(data)-1].ID
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	case len(data) == 0:
		s.writeError(w, sluice.ProtocolAnthropic, &sluice.Error{Code: sluice.CodeModelNotFound, Msg: "model: " + id})
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(data[0])
	}
}
