package upstream

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice"
)

// AzureOpenAIChat and AzureOpenAIEmbeddings are OpenAI's chat completions
// and embeddings hosted on Azure OpenAI: the body is OpenAI's (Azure reads
// the deployment from the URL and ignores "model"), sent to
// {base}/openai/deployments/{deployment}/chat/completions?api-version=…
// (the edge's model is the deployment's name, the endpoint's azure block
// the API version), with the resource's key in api-key or an Entra ID
// access token (an oauth credential of grant client_credentials) as a
// bearer token. Answers, usage and streams are OpenAI's; Azure's 429s say
// how long to wait in retry-after-ms and retry-after (RetryAfter), and a
// content filter's 400 (code content_filter) goes back to the caller.
var (
	AzureOpenAIChat = Hosted(OpenAIChat, Hosting{
		URL: azureURL("/chat/completions"), Authorize: azureKeyAuth, AuthorizeToken: bearerAuth,
	})
	AzureOpenAIEmbeddings = Hosted(OpenAIEmbeddings, Hosting{
		URL: azureURL("/embeddings"), Authorize: azureKeyAuth, AuthorizeToken: bearerAuth,
	})
)

// azureURL is the URL of an operation on a deployment: a base URL written
// with Azure's /openai path keeps it once.
func azureURL(operation string) func(*sluice.Request, *sluice.Endpoint, string) string {
	return func(req *sluice.Request, ep *sluice.Endpoint, deployment string) string {
		if req.CountTokens || req.Compact {
			return ""
		}
		base := strings.TrimSuffix(strings.TrimSuffix(ep.BaseURL, "/"), "/openai")
		return base + "/openai/deployments/" + url.PathEscape(deployment) + operation + "?api-version=" + url.QueryEscape(ep.Host.APIVersion)
	}
}

// azureKeyAuth presents a resource key as Azure takes it: api-key.
func azureKeyAuth(h, _ http.Header, secret string) {
	h["Api-Key"] = []string{secret}
}
