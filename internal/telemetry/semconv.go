package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/sluicehq/sluice"
)

// Sluice's own span attributes. The GenAI ones come from the semantic
// conventions' v1.41.0 package (semconv), the last release that holds them.
const (
	attrRequestID     = attribute.Key("sluice.request_id")
	attrKeyID         = attribute.Key("sluice.key_id")
	attrTenant        = attribute.Key("sluice.tenant")
	attrPriority      = attribute.Key("sluice.priority_class")
	attrAttempts      = attribute.Key("sluice.attempts")
	attrAttempt       = attribute.Key("sluice.attempt")
	attrQueueWait     = attribute.Key("sluice.queue_wait") // seconds
	attrErrorCode     = attribute.Key("sluice.error_code")
	attrErrorClass    = attribute.Key("sluice.error_class")
	attrAccount       = attribute.Key("sluice.account_id")
	attrCredential    = attribute.Key("sluice.credential_id")
	attrEndpoint      = attribute.Key("sluice.endpoint_id")
	attrFallback      = attribute.Key("sluice.fallback_reason")
	attrFirstByte     = attribute.Key("sluice.upstream.first_byte") // seconds
	attrPrompt        = attribute.Key("sluice.prompt")
	attrPromptCut     = attribute.Key("sluice.prompt.truncated")
	attrCompletion    = attribute.Key("sluice.completion")
	attrCompletionCut = attribute.Key("sluice.completion.truncated")
)

// operation is gen_ai.operation.name of a request in protocol p: a
// generation is chat (Gemini's is generate_content), an embedding
// embeddings; an Anthropic token count is Sluice's own count_tokens.
func operation(p sluice.Protocol, countTokens bool) attribute.KeyValue {
	switch {
	case countTokens:
		return semconv.GenAIOperationNameKey.String("count_tokens")
	case p == sluice.ProtocolGemini:
		return semconv.GenAIOperationNameGenerateContent
	case p == sluice.ProtocolOpenAIEmbeddings || p == sluice.ProtocolGeminiEmbed:
		return semconv.GenAIOperationNameEmbeddings
	case p == sluice.ProtocolOpenAIVideos || p == sluice.ProtocolFalQueue:
		return semconv.GenAIOperationNameKey.String("video_generation")
	}
	return semconv.GenAIOperationNameChat
}

// provider is gen_ai.provider.name of an edge: the cloud that hosts its
// protocol, else the protocol's maker. An OpenAI-compatible server (vLLM,
// a proxy) speaks openai and is named so: Sluice knows the wire, not the
// vendor behind it.
func provider(e *sluice.Edge) attribute.KeyValue {
	switch e.Endpoint.Host.Cloud {
	case sluice.CloudAzure:
		return semconv.GenAIProviderNameAzureAIOpenAI
	case sluice.CloudVertex:
		return semconv.GenAIProviderNameGCPVertexAI
	case sluice.CloudBedrock:
		return semconv.GenAIProviderNameAWSBedrock
	}
	switch e.Protocol {
	case sluice.ProtocolAnthropic:
		return semconv.GenAIProviderNameAnthropic
	case sluice.ProtocolGemini, sluice.ProtocolGeminiEmbed:
		return semconv.GenAIProviderNameGCPGemini
	case sluice.ProtocolFalQueue:
		return semconv.GenAIProviderNameKey.String("fal")
	}
	return semconv.GenAIProviderNameOpenAI
}
