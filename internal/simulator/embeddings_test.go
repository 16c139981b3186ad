package simulator_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/simulator"
)

type embeddingList struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// vectors decodes every embedding, float arrays and base64 alike.
func (l embeddingList) vectors(t *testing.T) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, d := range l.Data {
		var v []float32
		if d.Embedding[0] == '"' {
			var s string
			_ = json.Unmarshal(d.Embedding, &s)
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw)%4 != 0 {
				t.Fatalf("base64 embedding %s: %v", s, err)
			}
			for i := 0; i < len(raw); i += 4 {
				v = append(v, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
			}
		} else if err := json.Unmarshal(d.Embedding, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func embed(t *testing.T, base, body string) embeddingList {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", base+"/v1/embeddings", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d (%s), want 200", resp.StatusCode, raw)
	}
	var l embeddingList
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return l
}

func TestEmbeddings(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	tests := []struct {
		name       string
		give       string
		wantN      int
		wantDims   int
		wantTokens int
	}{
		{"string", `"input":"the quick fox"`, 1, 8, 3},
		{"strings", `"input":["the quick fox","lazy dog"]`, 2, 8, 5},
		{"tokens", `"input":[101,102,103,104]`, 1, 8, 4},
		{"token arrays", `"input":[[1,2],[3]]`, 2, 8, 3},
		{"dimensions", `"input":"the quick fox","dimensions":3`, 1, 3, 3},
		{"base64", `"input":["the quick fox","lazy dog"],"encoding_format":"base64"`, 2, 8, 5},
		{"base64 dimensions", `"input":"the quick fox","encoding_format":"base64","dimensions":5`, 1, 5, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := embed(t, srv.URL, `{"model":"text-embedding-3-small",`+tt.give+`}`)
			if l.Object != "list" || l.Model != "text-embedding-3-small" {
				t.Errorf("envelope object %q model %q, want list and the model", l.Object, l.Model)
			}
			if l.Usage.PromptTokens != tt.wantTokens || l.Usage.TotalTokens != tt.wantTokens {
				t.Errorf("usage = %+v, want %d tokens", l.Usage, tt.wantTokens)
			}
			vs := l.vectors(t)
			if len(vs) != tt.wantN {
				t.Fatalf("%d embeddings, want %d", len(vs), tt.wantN)
			}
			for i, v := range vs {
				if l.Data[i].Object != "embedding" || l.Data[i].Index != i {
					t.Errorf("data[%d] object %q index %d", i, l.Data[i].Object, l.Data[i].Index)
				}
				if len(v) != tt.wantDims {
					t.Errorf("data[%d] has %d dims, want %d", i, len(v), tt.wantDims)
				}
				var norm float64
				for _, f := range v {
					norm += float64(f) * float64(f)
				}
				if math.Abs(norm-1) > 1e-5 {
					t.Errorf("data[%d] norm² = %v, want unit length", i, norm)
				}
			}
			if tt.wantN == 2 && cmp.Equal(vs[0], vs[1]) {
				t.Error("two inputs got the same vector")
			}
		})
	}
}

func TestEmbeddingsDeterministicAcrossFormats(t *testing.T) {
	_, srv := start(t, simulator.Options{})
	floats := embed(t, srv.URL, `{"model":"m","input":["alpha","beta"]}`).vectors(t)
	again := embed(t, srv.URL, `{"model":"m","input":["alpha","beta"]}`).vectors(t)
	b64 := embed(t, srv.URL, `{"model":"m","input":["alpha","beta"],"encoding_format":"base64"}`).vectors(t)
	single := embed(t, srv.URL, `{"model":"m","input":"beta"}`).vectors(t)
	if diff := cmp.Diff(floats, again); diff != "" {
		t.Errorf("repeat request (-first +second):\n%s", diff)
	}
	if diff := cmp.Diff(floats, b64); diff != "" {
		t.Errorf("float vs base64 (-float +base64):\n%s", diff)
	}
	if diff := cmp.Diff(floats[1], single[0]); diff != "" {
		t.Errorf("an input's vector depends on its batch (-batch +single):\n%s", diff)
	}
}
