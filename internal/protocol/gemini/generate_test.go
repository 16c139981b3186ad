package gemini

import (
	"testing"

	"github.com/sluicehq/sluice"
)

// TestUsage checks that Gemini's usage, whose candidates count excludes
// the thoughts, and Sluice's, whose completion includes them, convert both
// ways; the tool-use prompt counts as prompt.
func TestUsage(t *testing.T) {
	g := UsageMetadata{PromptTokenCount: 2100, CachedContentTokenCount: 1800, CandidatesTokenCount: 40, ThoughtsTokenCount: 120, ToolUsePromptTokenCount: 10, TotalTokenCount: 2270}
	want := sluice.Usage{PromptTokens: 2110, CompletionTokens: 160, CachedTokens: 1800, ReasoningTokens: 120, TotalTokens: 2270, Measured: true}
	got := g.Sluice()
	if got != want {
		t.Errorf("Sluice() = %+v, want %+v", got, want)
	}
	back := UsageMetadata{PromptTokenCount: 2110, CachedContentTokenCount: 1800, CandidatesTokenCount: 40, ThoughtsTokenCount: 120, TotalTokenCount: 2270}
	if u := UsageOf(got); *u != back {
		t.Errorf("UsageOf(%+v) = %+v, want %+v", got, *u, back)
	}
}

// TestReadRequestSnakeCase checks that snake_case member names are read
// as Google reads them, but not within the caller's own JSON.
func TestReadRequestSnakeCase(t *testing.T) {
	r, err := ReadRequest([]byte(`{"system_instruction":{"parts":[{"text":"s"}]},"contents":[{"role":"model","parts":[{"function_call":{"name":"f","args":{"unit_system":"si"}}}]}],` +
		`"tools":[{"function_declarations":[{"name":"f","parameters_json_schema":{"properties":{"unit_system":{}}}}]},{"code_execution":{}}],"generation_config":{"max_output_tokens":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case r.SystemInstruction == nil || r.SystemInstruction.Parts[0].Text != "s":
		t.Errorf("systemInstruction = %+v", r.SystemInstruction)
	case string(r.Contents[0].Parts[0].FunctionCall.Args) != `{"unit_system":"si"}`:
		t.Errorf("args = %s, want the caller's names as written", r.Contents[0].Parts[0].FunctionCall.Args)
	case string(r.Tools[0].FunctionDeclarations[0].ParametersJSONSchema) != `{"properties":{"unit_system":{}}}`:
		t.Errorf("schema = %s, want as written", r.Tools[0].FunctionDeclarations[0].ParametersJSONSchema)
	case len(r.Tools[1].Builtin) != 1 || r.Tools[1].Builtin[0] != "codeExecution":
		t.Errorf("built-in tools = %v, want [codeExecution]", r.Tools[1].Builtin)
	case r.GenerationConfig == nil || *r.GenerationConfig.MaxOutputTokens != 5:
		t.Errorf("generationConfig = %+v", r.GenerationConfig)
	}
}

func TestStatus(t *testing.T) {
	for code, want := range map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
		429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED", 422: "INVALID_ARGUMENT", 502: "INTERNAL"} {
		if got := Status(code); got != want {
			t.Errorf("Status(%d) = %s, want %s", code, got, want)
		}
	}
}
