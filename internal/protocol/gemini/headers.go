package gemini

// PassHeaders are the caller's headers that a Gemini API upstream may
// need, passed on when the caller speaks Gemini too (and dropped when its
// request is translated): the client library's x-goog-api-client (Gemini
// CLI's google-genai-sdk/…) and user-agent. A trailing '*' is a prefix.
// (x-goog-user-project is not: it chooses the project billed.)
var PassHeaders = []string{"x-goog-api-client", "user-agent"}
