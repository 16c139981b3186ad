package upstream

import (
	"net/http"
	"slices"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol/anthropic"
)

// AnthropicMessages is the upstream side of Anthropic's Messages API: the
// secret in x-api-key (an OAuth access token as a bearer token, with the
// oauth beta flag), anthropic-version 2023-06-01 unless the caller's
// passed on (anthropic.PassHeaders says which), usage in message_start and
// message_delta, and a stream of named events that ends with message_stop
// (docs/protocols.md).
var AnthropicMessages = &Dialect{
	Path: anthropic.Path, CountPath: anthropic.CountPath, Authorize: anthropicAuth, AuthorizeToken: anthropicTokenAuth,
	Prepare: prepareModel, Usage: anthropic.UsageValue, Event: anthropic.Event, CountAnswer: anthropic.CountAnswer,
	Pass: sluice.NewHeaderSet(anthropic.PassHeaders...),
}

// AnthropicEnding ends a committed stream as Anthropic does: an "error"
// event, Sluice's error in Anthropic's envelope.
var AnthropicEnding = endingOf("error", anthropic.Envelope)

// anthropicVersion is the API version Sluice asks for when the caller
// names none.
var anthropicVersion = []string{anthropic.Version}

// anthropicAuth presents the secret as x-api-key, with an API version.
func anthropicAuth(h, _ http.Header, secret string) {
	h["X-Api-Key"] = []string{secret}
	setAnthropicVersion(h)
}

// oauthBeta is the beta flag with which Anthropic takes an OAuth access
// token (a Claude subscription's, as Claude Code sends it) as a bearer
// token instead of an API key.
const oauthBeta = "oauth-2025-04-20"

// anthropicTokenAuth presents an OAuth access token: a bearer token, with
// oauthBeta added to the betas passed on from the caller.
func anthropicTokenAuth(h, _ http.Header, token string) {
	h["Authorization"] = []string{"Bearer " + token}
	setAnthropicVersion(h)
	betas := h["Anthropic-Beta"]
	for _, v := range betas {
		for b := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(b) == oauthBeta {
				return
			}
		}
	}
	// A new slice: betas is the caller's, passed on.
	h["Anthropic-Beta"] = []string{strings.Join(append(slices.Clone(betas), oauthBeta), ",")}
}

// setAnthropicVersion asks for anthropicVersion unless the caller's
// version was passed on.
func setAnthropicVersion(h http.Header) {
	if len(h["Anthropic-Version"]) == 0 {
		h["Anthropic-Version"] = anthropicVersion
	}
}

// prepareModel adapts a body to an edge's model: only "model" changes (an
// Anthropic stream reports usage without being asked).
func prepareModel(req *sluice.Request, model string) ([]byte, error) {
	if model == req.Model {
		return req.Body, nil
	}
	return jsonfield.SetString(req.Body, "model", model)
}
