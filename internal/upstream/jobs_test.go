package upstream

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
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

// TestJobAnswersAreScrubbed checks a job API answer that quotes the
// credential back (in its body and a header) reaches Sluice's caller side
// masked: the secret in a 2xx, and key-shaped text too in an error.
func TestJobAnswersAreScrubbed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("X-Echo", auth)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Has("fail") {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"bad %s, also sk-other-0123456789abc"}}`, auth)
			return
		}
		fmt.Fprintf(w, `{"id":"video_1","status":"queued","note":%q}`, auth)
	}))
	t.Cleanup(srv.Close)
	c := New(slog.New(slog.NewTextHandler(io.Discard, nil)), testProtocols, func(string) BreakerSettings { return BreakerSettings{Failures: 5, Open: time.Second} }, nil)
	t.Cleanup(c.Close)
	e := testEdge(srv.URL)
	e.Protocol = sluice.ProtocolOpenAIVideos
	for _, query := range []string{"", "?fail"} {
		resp, a := c.CallJob(t.Context(), e, JobCall{Method: http.MethodGet, URL: JobURL(e, "video_1") + query})
		if resp == nil {
			t.Fatalf("CallJob%s = %+v, want an answer", query, a)
		}
		body, err := ReadJobAnswer(resp)
		if err != nil || strings.Contains(string(body), testSecret) || strings.Contains(string(body), "sk-other") ||
			strings.Contains(resp.Header.Get("X-Echo"), testSecret) {
			t.Errorf("CallJob%s: body %s (%v), X-Echo %q; want the secret masked (and other keys in an error)", query, body, err, resp.Header.Get("X-Echo"))
		}
	}
}
