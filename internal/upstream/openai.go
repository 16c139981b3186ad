package upstream

import (
	"net/http"

	"github.com/sluicehq/sluice"

	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// OpenAIChat and OpenAIEmbeddings are the upstream sides of OpenAI's chat
// completions and embeddings, and of the many upstreams compatible with
// them: a Bearer credential, usage in the answer's "usage", a stream of
// unnamed chunks that ends with [DONE].
var (
	OpenAIChat = &Dialect{
		Path: openai.ChatPath, Authorize: bearerAuth, Prepare: PrepareBody, Usage: openai.UsageValue, Event: openai.ChatEvent,
		Pass: openAIPass,
	}
	OpenAIEmbeddings = &Dialect{
		Path: openai.EmbeddingsPath, Authorize: bearerAuth, Prepare: PrepareBody, Usage: openai.UsageValue, Event: openai.ChatEvent,
		Pass: openAIPass,
	}
)

// openAIPass is what OpenAI's protocols pass on of a caller's headers.
var openAIPass = sluice.NewHeaderSet(openai.PassHeaders...)

// OpenAIVideos and FalQueue are the upstream sides of the job protocols
// as far as the job engine (jobs.go) uses them: how a credential is
// presented (OpenAI's bearer token, fal's "Key"). Their paths and answers
// are the job engine's.
var (
	OpenAIVideos = &Dialect{Authorize: bearerAuth}
	FalQueue     = &Dialect{Authorize: falAuth}
)

// falAuth presents the secret as fal's "Authorization: Key".
func falAuth(h, _ http.Header, secret string) {
	h["Authorization"] = []string{"Key " + secret}
}

// OpenAIEnding ends a committed stream in the OpenAI dialect that SDKs
// recognise: a chunk with an "error" key, Sluice's error in OpenAI's
// envelope.
var OpenAIEnding = endingOf("", openai.Envelope)

// bearerAuth presents the secret as OpenAI's "Authorization: Bearer".
func bearerAuth(h, _ http.Header, secret string) {
	h["Authorization"] = []string{"Bearer " + secret}
}
