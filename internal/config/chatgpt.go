package config

import (
	"fmt"
	"net/http"
)

// ChatGPT puts an endpoint on the ChatGPT backend, where Codex signed in
// with a ChatGPT account sends its requests (base URL
// https://chatgpt.com/backend-api/codex): OpenAI's Responses API, posted
// to {base_url}/responses, for the subscription of a ChatGPT account
// rather than an API organization. Its credentials are such sign-ins: an
// oauth credential with the Codex CLI's public client (or a static access
// token), each naming its ChatGPT account in the chatgpt-account-id header
// (credentials[].headers), which the backend routes by.
//
// The block has no settings: it says where the endpoint is, as azure's
// and vertex's do, and the endpoint keeps speaking openai.responses, so
// every caller a Responses endpoint serves is served on it.
type ChatGPT struct{}

// ChatGPTAccountHeader is the header that names a credential's ChatGPT
// account to the backend.
const ChatGPTAccountHeader = "Chatgpt-Account-Id"

// chatgptCredential checks that a credential serving an endpoint on the
// ChatGPT backend names its account: the backend refuses a request
// without one, so the credential could never serve.
func (v *validator) chatgptCredential(at string, cr *Credential) {
	for j, id := range cr.Endpoints {
		e := v.endpointByID[id]
		if e == nil || e.ChatGPT == nil {
			continue
		}
		for name := range cr.Headers {
			if http.CanonicalHeaderKey(name) == ChatGPTAccountHeader {
				return
			}
		}
		v.addf(fmt.Sprintf("%s.endpoints[%d]", at, j), "endpoint %q is on the ChatGPT backend: the credential needs headers: {chatgpt-account-id: <its ChatGPT account id>}", id)
		return
	}
}
