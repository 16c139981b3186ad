// Package openai translates between the protocols callers speak and an
// upstream that speaks OpenAI Chat Completions, one file per caller
// protocol (from_anthropic.go, from_gemini.go, from_responses.go). The
// wire types of every protocol it touches are the protocols' own: OpenAI's
// (internal/protocol/openai) are imported here as wire, since this package
// is named openai too. The package depends only on package sluice, package
// adapter, the protocol packages and the standard library.
package openai
