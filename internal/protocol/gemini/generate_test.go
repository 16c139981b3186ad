package gemini

import (
	"testing"
)

// TestReadRequestSnakeCase checks that snake_case member names are read
// as Google reads them, but not within the caller's own JSON.
func TestReadRequestSnakeCase(t *testing.T) {
	r, _, err := ReadRequest([]byte(`{"system_instruction":{"parts":[{"text":"s"}]},"contents":[{"role":"model","parts":[{"function_call":{"name":"f","args":{"unit_system":"si"}}}]}],` +
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
