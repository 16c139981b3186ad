package openai

// PassHeaders are the caller's headers that an upstream of OpenAI's
// protocols (chat, Responses, embeddings) may need, passed on when the
// caller speaks the upstream's protocol (and dropped when its request is
// translated: they describe the caller's protocol): openai-beta, what
// Codex identifies itself and its session with (originator, session and
// thread ids, x-codex-*, the ChatGPT account it is signed in to), the
// SDK's x-stainless-*, and user-agent, which the ChatGPT backend checks.
// A trailing '*' is a prefix. (OpenAI-Organization and OpenAI-Project are
// not: they choose what the upstream credential bills.)
var PassHeaders = []string{
	"openai-beta", "originator", "session_id", "session-id", "thread-id", "conversation_id",
	"x-client-request-id", "x-codex-*", "chatgpt-account-id", "x-stainless-*", "user-agent",
}
