// Package anthropic is the home of Anthropic's Messages protocol
// (anthropic.messages): its paths, its wire types (the request, the
// answer, the stream events, the usage and the error envelope), the one
// table from an HTTP status to its error type, and how Sluice reads its
// usage. The caller side (ingress), the upstream side (upstream) and both
// directions of translation (adapter/anthropic, whose upstream speaks
// Messages, and adapter/openai/from_anthropic.go, whose caller does) use
// it, so that each fact about the protocol is written once. It imports
// nothing of ours but package sluice and the leaf jsonfield.
package anthropic

// The paths of the Messages API: a request, and its token count.
const (
	Path      = "/v1/messages"
	CountPath = "/v1/messages/count_tokens"
)

// Version is the API version (the anthropic-version header) Sluice asks
// for when the caller names none.
const Version = "2023-06-01"
