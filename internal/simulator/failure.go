package simulator

import (
	"net/http"
	"strconv"
	"time"
)

// htmlType is the content type of Cloudflare's error pages.
const htmlType = "text/html; charset=UTF-8"

// apiError is a request error found while parsing, answered after Latency.
type apiError struct {
	status int
	body   []byte
}

// openAIError renders OpenAI's error envelope. An empty param or code is
// sent as null, as OpenAI does.
func openAIError(msg, typ, param, code string) []byte {
	b := make([]byte, 0, 96+len(msg))
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"param":`...)
	b = appendStringOrNull(b, param)
	b = append(b, `,"code":`...)
	b = appendStringOrNull(b, code)
	return append(b, "}}"...)
}

func appendStringOrNull(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

func invalidRequest(msg, param, code string) *apiError {
	return &apiError{http.StatusBadRequest, openAIError(msg, "invalid_request_error", param, code)}
}

var (
	missingKey = openAIError("You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank username) if you're accessing the API from your browser and are prompted for a username and password. You can obtain an API key from https://platform.openai.com/account/api-keys.",
		"invalid_request_error", "", "")
	bodyTooLarge = openAIError("Request body too large.", "invalid_request_error", "", "")
	invalidJSON  = invalidRequest("We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)", "", "")
	missingModel = invalidRequest("you must provide a model parameter", "", "")
)

func invalidURL(r *http.Request) []byte {
	return openAIError("Invalid URL ("+r.Method+" "+r.URL.Path+")", "invalid_request_error", "", "")
}

// incorrectKey masks the key like OpenAI: a short prefix and the last four.
func incorrectKey(key string) []byte {
	masked := "****"
	if len(key) > 8 {
		masked = key[:3] + "*****" + key[len(key)-4:]
	}
	return openAIError("Incorrect API key provided: "+masked+". You can find your API key at https://platform.openai.com/account/api-keys.",
		"invalid_request_error", "", "invalid_api_key")
}

func modelNotFound(model string) []byte {
	return openAIError("The model `"+model+"` does not exist or you do not have access to it.",
		"invalid_request_error", "", "model_not_found")
}

// rateLimitBody is OpenAI's requests-per-minute 429. The simulator's caps are
// on concurrency, but gateways classify on this body, so it mimics the real
// one. retryAfter 0 leaves out the "try again" hint.
func rateLimitBody(model, account string, limit int, retryAfter time.Duration) []byte {
	org := "org-simulator"
	if account != "" {
		org = "org-" + account
	}
	if model == "" {
		model = "requests"
	}
	n := strconv.Itoa(limit)
	msg := "Rate limit reached for " + model + " in organization " + org + " on requests per min (RPM): Limit " + n + ", Used " + n + ", Requested 1."
	if retryAfter > 0 {
		msg += " Please try again in " + retryAfter.String() + "."
	}
	msg += " Visit https://platform.openai.com/account/rate-limits to learn more."
	return openAIError(msg, "requests", "", "rate_limit_exceeded")
}

// failureBody is what a real provider (or the CDN in front of it) sends with
// status. 401 and 429 are answered elsewhere: they need the key or headers.
func failureBody(status int) (contentType string, body []byte) {
	switch {
	case status == http.StatusInternalServerError:
		return "application/json", openAIError("The server had an error while processing your request. Sorry about that!", "server_error", "", "")
	case status == http.StatusBadGateway:
		// OpenAI's edge answers 502 and 504 with a numeric code and a cf_ type.
		return "application/json", []byte(`{"error":{"code":502,"message":"Bad gateway.","param":null,"type":"cf_bad_gateway"}}`)
	case status == http.StatusServiceUnavailable:
		return "application/json", openAIError("The server is overloaded or not ready yet.", "server_error", "", "")
	case status == http.StatusGatewayTimeout:
		return "application/json", []byte(`{"error":{"code":504,"message":"Gateway timeout.","param":null,"type":"cf_gateway_timeout"}}`)
	case status == 529:
		// Only Anthropic uses 529; its body is what gateways see with it.
		return "application/json", []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	case status >= 520 && status <= 530:
		return htmlType, cloudflarePage(status)
	case status == http.StatusForbidden:
		return "application/json", openAIError("Country, region, or territory not supported", "request_forbidden", "", "unsupported_country_region_territory")
	case status == http.StatusNotFound:
		return "application/json", openAIError("Not found.", "invalid_request_error", "", "")
	case status >= 500:
		return "application/json", openAIError(http.StatusText(status)+".", "server_error", "", "")
	}
	return "application/json", openAIError(http.StatusText(status)+".", "invalid_request_error", "", "")
}

// cloudflareTitles are Cloudflare's headlines for the 52x it generates.
var cloudflareTitles = map[int]string{
	520: "Web server is returning an unknown error",
	521: "Web server is down",
	522: "Connection timed out",
	523: "Origin is unreachable",
	524: "A timeout occurred",
	525: "SSL handshake failed",
	526: "Invalid SSL certificate",
	530: "Origin DNS error",
}

func cloudflarePage(status int) []byte {
	title, ok := cloudflareTitles[status]
	if !ok {
		title = "Unknown error"
	}
	code := strconv.Itoa(status)
	return []byte(`<!DOCTYPE html>
<html lang="en-US">
<head><meta charset="UTF-8"><title>api.openai.com | ` + code + `: ` + title + `</title></head>
<body>
<div id="cf-wrapper"><div id="cf-error-details">
<h1><span class="inline-block">` + title + `</span> <span class="code-label">Error code ` + code + `</span></h1>
<p>Visit <a href="https://www.cloudflare.com/5xx-error-landing">cloudflare.com</a> for more information.</p>
</div></div>
</body>
</html>
`)
}

// missingKey answers a request without a credential in its endpoint's
// dialect.
func (c *call) missingKey() {
	switch {
	case c.ep.bedrock():
		c.awsFail(http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
	case c.ep.fal():
		c.fail(http.StatusUnauthorized, falDetail("Missing authorization header. Use 'Authorization: Key <FAL_KEY>'."))
	case c.ep.gemini():
		c.fail(http.StatusForbidden, geminiMissingKey)
	case c.ep.anthropic():
		c.anthropicFail(http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
	default:
		c.fail(http.StatusUnauthorized, missingKey)
	}
}

// invalidKey answers a request with an invalid credential in its endpoint's
// dialect.
func (c *call) invalidKey(key string) {
	switch {
	case c.ep.bedrock():
		c.awsFail(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
	case c.ep.fal():
		c.fail(http.StatusUnauthorized, falDetail("Invalid key"))
	case c.ep.gemini():
		c.fail(http.StatusBadRequest, geminiKeyInvalid)
	case c.ep.anthropic():
		c.anthropicFail(http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	default:
		c.fail(http.StatusUnauthorized, incorrectKey(key))
	}
}

// modelNotFound answers a model the simulator does not serve.
func (c *call) modelNotFound(model string) {
	if c.ep.bedrock() {
		c.awsFail(http.StatusBadRequest, "ValidationException", "The provided model identifier is invalid.")
		return
	}
	if c.ep.anthropic() {
		c.anthropicFail(http.StatusNotFound, "not_found_error", "model: "+model)
		return
	}
	if c.ep.gemini() {
		c.fail(http.StatusNotFound, geminiModelNotFound(model))
		return
	}
	c.fail(http.StatusNotFound, modelNotFound(model))
}

// tooLarge answers a body over maxBody.
func (c *call) tooLarge() {
	if c.ep.bedrock() {
		c.awsFail(http.StatusRequestEntityTooLarge, "ValidationException", "Input is too long for requested model.")
		return
	}
	if c.ep.anthropic() {
		c.anthropicFail(http.StatusRequestEntityTooLarge, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
		return
	}
	if c.ep.gemini() {
		c.fail(http.StatusRequestEntityTooLarge, googleError(http.StatusRequestEntityTooLarge, "INVALID_ARGUMENT", "Request payload size exceeds the limit.", ""))
		return
	}
	c.fail(http.StatusRequestEntityTooLarge, bodyTooLarge)
}
