package app

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/anthropic"
	"github.com/sluicehq/sluice/internal/adapter/gemini"
	"github.com/sluicehq/sluice/internal/adapter/openai"
	"github.com/sluicehq/sluice/internal/adapter/responses"
	"github.com/sluicehq/sluice/internal/ingress"
	"github.com/sluicehq/sluice/internal/upstream"
)

// protocolTable is every protocol Sluice speaks, its caller side (front:
// paths, key, error envelope; body parsing is ingress.Parse's) and its
// upstream side (dialect: path, credential headers, body, usage, stream),
// with the events that end a broken stream in the caller's protocol. A
// job protocol (videos, fal) has a front for its errors and a dialect for
// its credential; its paths and answers are the job engine's.
var protocolTable = []struct {
	front   *ingress.Front
	dialect *upstream.Dialect
	ending  *upstream.Ending
}{
	{ingress.OpenAIChat, upstream.OpenAIChat, upstream.OpenAIEnding},
	{ingress.OpenAIEmbeddings, upstream.OpenAIEmbeddings, upstream.OpenAIEnding},
	{ingress.AnthropicMessages, upstream.AnthropicMessages, upstream.AnthropicEnding},
	{ingress.OpenAIResponses, upstream.OpenAIResponses, upstream.ResponsesEnding},
	{ingress.GeminiGenerate, upstream.GeminiGenerate, upstream.GeminiEnding},
	{ingress.GeminiEmbed, upstream.GeminiEmbed, upstream.GeminiEnding},
	{ingress.OpenAIVideos, upstream.OpenAIVideos, nil},
	{ingress.FalQueue, upstream.FalQueue, nil},
}

// hostTable is the clouds that host a wire protocol under their own URLs
// and credentials (sluice.CloudProtocols), each with the protocol's
// dialect as the cloud changes it (upstream.Hosted). An endpoint on a
// cloud (its azure, vertex, bedrock, code_assist or chatgpt block) still
// speaks the wire protocol, so the fronts, endings and translators above
// serve it unchanged.
var hostTable = map[upstream.HostedKey]*upstream.Dialect{
	{Cloud: sluice.CloudAzure, Protocol: sluice.ProtocolOpenAIChat}:       upstream.AzureOpenAIChat,
	{Cloud: sluice.CloudAzure, Protocol: sluice.ProtocolOpenAIEmbeddings}: upstream.AzureOpenAIEmbeddings,
	{Cloud: sluice.CloudVertex, Protocol: sluice.ProtocolGemini}:          upstream.VertexGemini,
	{Cloud: sluice.CloudVertex, Protocol: sluice.ProtocolAnthropic}:       upstream.VertexAnthropic,
	{Cloud: sluice.CloudBedrock, Protocol: sluice.ProtocolAnthropic}:      upstream.BedrockAnthropic,
	{Cloud: sluice.CloudCodeAssist, Protocol: sluice.ProtocolGemini}:      upstream.CodeAssistGemini,

	// The ChatGPT backend hosts Responses for Codex signed in with ChatGPT.
	{Cloud: sluice.CloudChatGPT, Protocol: sluice.ProtocolOpenAIResponses}: upstream.ChatGPTResponses,
}

// translatorTable is the pairs of protocols Sluice translates between: a
// caller of the first protocol is served by an endpoint that speaks the
// second through a new translator per execution. An edge exists wherever
// protocolTable and this table can serve (upstream.Protocols.CanServe).
var translatorTable = map[upstream.Pair]func() adapter.Translator{
	{Caller: sluice.ProtocolAnthropic, Upstream: sluice.ProtocolOpenAIChat}:       func() adapter.Translator { return openai.NewFromAnthropic() },
	{Caller: sluice.ProtocolOpenAIChat, Upstream: sluice.ProtocolAnthropic}:       func() adapter.Translator { return anthropic.NewFromOpenAI() },
	{Caller: sluice.ProtocolOpenAIResponses, Upstream: sluice.ProtocolOpenAIChat}: func() adapter.Translator { return openai.NewFromResponses() },
	{Caller: sluice.ProtocolOpenAIChat, Upstream: sluice.ProtocolOpenAIResponses}: func() adapter.Translator { return responses.NewFromOpenAI() },
	{Caller: sluice.ProtocolGemini, Upstream: sluice.ProtocolOpenAIChat}:          func() adapter.Translator { return openai.NewFromGemini() },
	{Caller: sluice.ProtocolOpenAIChat, Upstream: sluice.ProtocolGemini}:          func() adapter.Translator { return gemini.NewFromOpenAI() },

	// The pairs without a direct translator meet at the hub, OpenAI chat
	// (adapter.Chain): the caller's translator to chat, then chat's to the
	// upstream. docs/api-protocols.md's matrix says what each loses.
	{Caller: sluice.ProtocolAnthropic, Upstream: sluice.ProtocolOpenAIResponses}: chained(openai.NewFromAnthropic, responses.NewFromOpenAI),
	{Caller: sluice.ProtocolOpenAIResponses, Upstream: sluice.ProtocolAnthropic}: chained(openai.NewFromResponses, anthropic.NewFromOpenAI),
	{Caller: sluice.ProtocolAnthropic, Upstream: sluice.ProtocolGemini}:          chained(openai.NewFromAnthropic, gemini.NewFromOpenAI),
	{Caller: sluice.ProtocolGemini, Upstream: sluice.ProtocolAnthropic}:          chained(openai.NewFromGemini, anthropic.NewFromOpenAI),
	{Caller: sluice.ProtocolOpenAIResponses, Upstream: sluice.ProtocolGemini}:    chained(openai.NewFromResponses, gemini.NewFromOpenAI),
	{Caller: sluice.ProtocolGemini, Upstream: sluice.ProtocolOpenAIResponses}:    chained(openai.NewFromGemini, responses.NewFromOpenAI),

	// Embeddings, both ways between OpenAI's and Gemini's.
	{Caller: sluice.ProtocolOpenAIEmbeddings, Upstream: sluice.ProtocolGeminiEmbed}: func() adapter.Translator { return gemini.NewFromOpenAIEmbeddings() },
	{Caller: sluice.ProtocolGeminiEmbed, Upstream: sluice.ProtocolOpenAIEmbeddings}: func() adapter.Translator { return openai.NewFromGeminiEmbed() },
}

// chained is the constructor of a chain of the translators in and out
// make (adapter.Chain), one pair per execution.
func chained[I, O adapter.Translator](in func() I, out func() O) func() adapter.Translator {
	return func() adapter.Translator { return adapter.NewChain(in(), out()) }
}

// fronts and dialects are both sides of every protocol, as the ingress and
// the upstream caller take them; dialects.CanServe says which endpoints can
// serve an alias, for validation and edges.
var fronts, dialects = protocols()

// protocols builds fronts and dialects from the tables.
func protocols() ([]*ingress.Front, *upstream.Protocols) {
	fronts := make([]*ingress.Front, 0, len(protocolTable))
	p := &upstream.Protocols{
		Dialects:    make(map[sluice.Protocol]*upstream.Dialect, len(protocolTable)),
		Hosted:      hostTable,
		Endings:     make(map[sluice.Protocol]*upstream.Ending, len(protocolTable)),
		Translators: translatorTable,
	}
	for _, row := range protocolTable {
		fronts = append(fronts, row.front)
		p.Dialects[row.front.Protocol] = row.dialect
		if row.ending != nil {
			p.Endings[row.front.Protocol] = row.ending
		}
	}
	return fronts, p
}
