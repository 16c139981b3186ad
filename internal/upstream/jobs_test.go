package upstream

import (
	"bytes"
	"mime/multipart"
	"strings"
	"testing"
)

func TestSetFormField(t *testing.T) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	_ = w.WriteField("prompt", "a kite")
	_ = w.WriteField("model", "sora-fast")
	f, _ := w.CreateFormFile("input_reference", "ref.png")
	_, _ = f.Write([]byte("\x89PNG\r\n\x1a\nbinary\x00bytes"))
	_ = w.Close()
	ct := w.FormDataContentType()

	got, err := SetFormField(body.Bytes(), ct, "model", "sora-2")
	if err != nil {
		t.Fatal(err)
	}
	form, err := multipart.NewReader(bytes.NewReader(got), w.Boundary()).ReadForm(1 << 20)
	if err != nil {
		t.Fatalf("the rewritten body does not parse: %v", err)
	}
	if m, p := form.Value["model"], form.Value["prompt"]; len(m) != 1 || m[0] != "sora-2" || len(p) != 1 || p[0] != "a kite" {
		t.Errorf("fields = %v, want model sora-2 once and the prompt kept", form.Value)
	}
	if fh := form.File["input_reference"]; len(fh) != 1 || fh[0].Size != 20 {
		t.Errorf("file part = %v, want the 20-byte upload kept", fh)
	}

	// A form without the field gets it added.
	var bare bytes.Buffer
	w2 := multipart.NewWriter(&bare)
	_ = w2.WriteField("prompt", "x")
	_ = w2.Close()
	got, err = SetFormField(bare.Bytes(), w2.FormDataContentType(), "model", "sora-2")
	if err != nil || !strings.Contains(string(got), "sora-2") {
		t.Errorf("SetFormField without the field = %q, %v", got, err)
	}
	if _, err := SetFormField([]byte("{}"), "application/json", "model", "m"); err == nil {
		t.Error("SetFormField of a JSON body succeeded")
	}
}
