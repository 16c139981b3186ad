// Package gemini is the home of the Gemini API's protocols, generateContent
// (gemini.generate) and embedContent (gemini.embed): the paths and the
// methods a model's path names, the wire types (the request, the answer,
// which is also each chunk of a stream, the usage and Google's error
// envelope), the one table from an HTTP status to Google's status name (and
// the envelope Sluice's own errors take), and how Sluice reads the usage and
// a stream's chunks and answers a token count. The caller side (ingress),
// the upstream side (upstream) and both directions of translation
// (adapter/gemini, whose upstream speaks Gemini, and
// adapter/openai/from_gemini.go, whose caller does) use it, so that each
// fact about the protocol is written once. It imports nothing of ours but
// package sluice, package protocol (what the protocols' stream reads share)
// and the leaves jsonfield and sse. Gemini's JSON names are lowerCamelCase.
package gemini

import (
	"strconv"

	"github.com/sluicehq/sluice"
)

// Versions are the API versions under which a model's methods are served:
// /v1beta, which Gemini CLI and the SDKs call, and /v1.
var Versions = [...]string{"/v1beta", "/v1"}

// Base is where the models are, under the version Sluice speaks to a
// Gemini upstream: a model's method is Base + model + ":" + method.
const Base = "/v1beta/models/"

// The methods of a model that Sluice serves: a model's path,
// models/{model}:{method}, names one.
const (
	MethodGenerate   = "generateContent"
	MethodStream     = "streamGenerateContent"
	MethodCount      = "countTokens"
	MethodEmbed      = "embedContent"
	MethodBatchEmbed = "batchEmbedContents"
)

// Methods gives each method the protocol that serves it.
var Methods = map[string]sluice.Protocol{
	MethodGenerate:   sluice.ProtocolGemini,
	MethodStream:     sluice.ProtocolGemini,
	MethodCount:      sluice.ProtocolGemini,
	MethodEmbed:      sluice.ProtocolGeminiEmbed,
	MethodBatchEmbed: sluice.ProtocolGeminiEmbed,
}

// ModelMethods are the methods a model of each protocol has, in the order
// a model list names them.
var ModelMethods = map[sluice.Protocol][]string{
	sluice.ProtocolGemini:      {MethodGenerate, MethodStream, MethodCount},
	sluice.ProtocolGeminiEmbed: {MethodEmbed, MethodBatchEmbed},
}

// UsageKey is the member of an answer (or a stream's chunk) that holds its
// usage.
const UsageKey = "usageMetadata"

// CountAnswer is countTokens' answer, {"totalTokens":N}, for a count of
// tokens: how Sluice answers a count with its own estimate.
func CountAnswer(tokens int64) []byte {
	return []byte(`{"totalTokens":` + strconv.FormatInt(tokens, 10) + `}`)
}
