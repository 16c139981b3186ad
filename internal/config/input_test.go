package config

import (
	"testing"

	"github.com/sluicehq/sluice"
)

func TestDeploymentInputValidate(t *testing.T) {
	input := func(kinds ...string) func(c *Catalog) {
		return func(c *Catalog) { c.Models[0].Deployments[0].Input = kinds }
	}
	checkValidate(t, []validateCase{
		{"absent", input(), ""},
		{"text", input("text"), ""},
		{"text and image", input("image", "text"), ""},
		{"empty", input([]string{}...), "models[0].deployments[0].input: must include text"},
		{"image alone", input("image"), "models[0].deployments[0].input: must include text"},
		{"unknown", input("text", "smell"), `models[0].deployments[0].input[1]: must be text or image, got "smell"`},
		{"audio not built", input("text", "audio"), `models[0].deployments[0].input[1]: "audio" is not supported yet`},
		{"file not built", input("text", "file"), `models[0].deployments[0].input[1]: "file" is not supported yet`},
		{"twice", input("text", "image", "text"), `models[0].deployments[0].input[2]: "text" is listed twice`},
		{"embeddings alias", func(c *Catalog) {
			c.Models[0].Protocol = "openai.embeddings"
			c.Endpoints[0].Protocols = append(c.Endpoints[0].Protocols, "openai.embeddings")
			input("text")(c)
		}, "models[0].deployments[0].input: openai.embeddings requests are not checked for images"},
	})
}

func TestDeploymentInputs(t *testing.T) {
	tests := []struct {
		give   []string
		want   sluice.Input
		images bool // whether it takes images
	}{
		{nil, 0, true}, // undeclared: everything, as before the field
		{[]string{"text"}, sluice.InputText, false},
		{[]string{"text", "image"}, sluice.InputText | sluice.InputImage, true},
	}
	for _, tt := range tests {
		d := Deployment{Input: tt.give}
		got := d.Inputs()
		if got != tt.want || got.Takes(sluice.InputImage) != tt.images || !got.Takes(sluice.InputText) {
			t.Errorf("Inputs(%v) = %b, taking images %v; want %b, %v, and text", tt.give, got, got.Takes(sluice.InputImage), tt.want, tt.images)
		}
	}
}

// The YAML form decodes: absent is nil (undeclared), [] is declared empty.
func TestDeploymentInputDecode(t *testing.T) {
	c, err := Decode([]byte("version: 1\nmodels:\n  - alias: a\n    deployments:\n      - {model: m, endpoints: [e], input: [text, image]}\n      - {model: m, endpoints: [e], input: []}\n      - {model: m, endpoints: [e]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Models[0].Deployments
	if d[0].Inputs() != sluice.InputText|sluice.InputImage || d[1].Input == nil || d[2].Input != nil {
		t.Errorf("decoded inputs %q, %q, %q; want [text image], [], absent", d[0].Input, d[1].Input, d[2].Input)
	}
}
