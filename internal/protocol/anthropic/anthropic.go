// Package anthropic is the home of Anthropic's Messages protocol
// (anthropic.messages): its paths, its wire types (the request, the answer,
// the stream events, the usage and the error envelope), the one table from
// an HTTP status to its error type (and the envelope Sluice's own errors
// take), and how Sluice reads its usage and its stream's events and answers
// a token count. The caller side (ingress), the upstream side (upstream) and
// both directions of translation (adapter/anthropic, whose upstream speaks
// Messages, and adapter/openai/from_anthropic.go, whose caller does) use it,
// so that each fact about the protocol is written once. It imports nothing
// of ours but package sluice, package protocol (what the protocols' stream
// reads share) and the leaves jsonfield and sse.
package anthropic

import "strconv"

// The paths of the Messages API: a request, and its token count.
const (
	Path      = "/v1/messages"
	CountPath = "/v1/messages/count_tokens"
)

// Version is the API version (the anthropic-version header) Sluice asks
// for when the caller names none.
const Version = "2023-06-01"

// CountAnswer is count_tokens' answer, {"input_tokens":N}, for a count of
// tokens: how Sluice answers a count with its own estimate.
func CountAnswer(tokens int64) []byte {
	return []byte(`{"input_tokens":` + strconv.FormatInt(tokens, 10) + `}`)
}
