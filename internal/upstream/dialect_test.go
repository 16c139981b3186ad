package upstream

import "github.com/sluicehq/sluice"

// testProtocols speaks what app's table does, for tests of the Caller.
var testProtocols = &Protocols{
	Dialects: map[sluice.Protocol]*Dialect{
		sluice.ProtocolOpenAIChat: OpenAIChat, sluice.ProtocolOpenAIEmbeddings: OpenAIEmbeddings,
		sluice.ProtocolAnthropic: AnthropicMessages, sluice.ProtocolOpenAIVideos: OpenAIVideos, sluice.ProtocolFalQueue: FalQueue,
	},
	Endings: map[sluice.Protocol]*Ending{
		sluice.ProtocolOpenAIChat: OpenAIEnding, sluice.ProtocolOpenAIEmbeddings: OpenAIEnding, sluice.ProtocolAnthropic: AnthropicEnding,
	},
}
