// Package openai is the home of OpenAI's protocols as Sluice speaks them:
// chat completions (openai.chat), Responses (openai.responses) and
// embeddings (openai.embeddings). It holds their paths, their wire types
// (requests, answers, stream chunks and events, usage, the error
// envelope), the one table from an HTTP status to the error type (and the
// envelopes Sluice's own errors take), and how Sluice reads their usage
// and their streams' events. The caller side (ingress), the upstream side
// (upstream) and the translators (adapter/...) use it, so that each fact
// about the protocols is written once. Chat is the hub every translation
// goes through. It imports nothing of ours but package sluice, package
// protocol (what the protocols' stream reads share) and the leaves
// jsonfield and sse.
package openai

// The paths of the protocols.
const (
	ChatPath       = "/v1/chat/completions"
	EmbeddingsPath = "/v1/embeddings"
	ResponsesPath  = "/v1/responses"
	// CodexResponsesPath is the ChatGPT backend's Responses path, where
	// Codex signed in with ChatGPT posts.
	CodexResponsesPath = "/backend-api/codex/responses"
	// CompactPath is a Responses compaction's.
	CompactPath = "/v1/responses/compact"
)
