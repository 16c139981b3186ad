package anthropic

// PassHeaders are the caller's headers that an upstream of the Messages
// API may need, passed on when the caller speaks Messages too (and dropped
// when its request is translated: they describe the caller's protocol):
// the API version and betas, and what Claude Code and the SDKs identify
// themselves with (x-app: cli, its session id, the SDK's x-stainless-*,
// user-agent claude-cli/…), which a subscription's backend checks. A
// trailing '*' is a prefix.
var PassHeaders = []string{
	"anthropic-version", "anthropic-beta", "anthropic-dangerous-direct-browser-access",
	"x-app", "x-claude-code-session-id", "x-stainless-*", "user-agent",
}
