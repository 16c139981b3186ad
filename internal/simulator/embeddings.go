package simulator

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
)

const (
	defaultDimensions = 8
	maxDimensions     = 3072 // text-embedding-3-large's size
	maxInputs         = 2048 // OpenAI's limit on input array items
)

// embeddingsRequest is the part of an embeddings request the simulator uses.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`

	inputs []embedInput // Input, decoded by parseEmbeddings
}

// embedInput is one input: text, or tokens when the caller sent token ids.
type embedInput struct {
	text   string
	tokens []int
}

var invalidInput = invalidRequest("'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.", "", "")

func parseEmbeddings(body []byte) parsed {
	req := &embeddingsRequest{}
	if err := json.Unmarshal(body, req); err != nil {
		return parsed{err: decodeError(err)}
	}
	p := parsed{model: req.Model, embed: req}
	switch {
	case req.Model == "":
		p.err = missingModel
	case len(req.Input) == 0 || string(req.Input) == "null":
		p.err = invalidRequest("Missing required parameter: 'input'.", "input", "missing_required_parameter")
	case req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64":
		p.err = invalidRequest("Invalid value for 'encoding_format': expected one of 'float' or 'base64', but got '"+req.EncodingFormat+"' instead.", "encoding_format", "invalid_value")
	case req.Dimensions != nil && (*req.Dimensions < 1 || *req.Dimensions > maxDimensions):
		p.err = invalidRequest("Invalid 'dimensions': expected a value between 1 and "+strconv.Itoa(maxDimensions)+", but got "+strconv.Itoa(*req.Dimensions)+" instead.", "dimensions", "invalid_value")
	default:
		req.inputs = decodeInputs(req.Input)
		if req.inputs == nil {
			p.err = invalidInput
		}
	}
	return p
}

// decodeInputs accepts every form OpenAI does: a string, strings, token ids,
// or arrays of token ids. It returns nil for anything else, empty strings,
// and empty or oversized arrays.
func decodeInputs(raw json.RawMessage) []embedInput {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil
		}
		return []embedInput{{text: one}}
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) == 0 || len(texts) > maxInputs {
			return nil
		}
		in := make([]embedInput, len(texts))
		for i, t := range texts {
			if t == "" {
				return nil
			}
			in[i].text = t
		}
		return in
	}
	var tokens []int
	if json.Unmarshal(raw, &tokens) == nil {
		if len(tokens) == 0 {
			return nil
		}
		return []embedInput{{tokens: tokens}}
	}
	var batches [][]int
	if json.Unmarshal(raw, &batches) == nil {
		if len(batches) == 0 || len(batches) > maxInputs {
			return nil
		}
		in := make([]embedInput, len(batches))
		for i, t := range batches {
			if len(t) == 0 {
				return nil
			}
			in[i].tokens = t
		}
		return in
	}
	return nil
}

// vector fills v with the unit-length embedding of in: deterministic from
// the input alone, like a real model's.
func (in embedInput) vector(v []float32) {
	seed := uint64(fnvOffset)
	if in.tokens == nil {
		seed = fnvAdd(seed, in.text)
	} else {
		var b [8]byte
		for _, t := range in.tokens {
			binary.LittleEndian.PutUint64(b[:], uint64(t))
			seed = fnvAdd(seed, string(b[:]))
		}
	}
	var norm float64
	for i := range v {
		f := float64(splitmix64(&seed)>>11)/(1<<53)*2 - 1
		v[i] = float32(f)
		norm += f * f
	}
	norm = math.Sqrt(norm)
	for i, f := range v {
		v[i] = float32(float64(f) / norm)
	}
}

// tokenCount counts an input like the simulator's chat: one token per word, or
// the token ids sent.
func (in embedInput) tokenCount() int {
	if in.tokens != nil {
		return len(in.tokens)
	}
	return countWords(in.text)
}

// embeddings answers a valid embeddings request.
func (c *call) embeddings(req *embeddingsRequest) {
	dims := defaultDimensions
	if req.Dimensions != nil {
		dims = *req.Dimensions
	}
	b64 := req.EncodingFormat == "base64"
	v := make([]float32, dims)
	raw := make([]byte, 4*dims)
	enc := make([]byte, base64.StdEncoding.EncodedLen(len(raw)))

	b := make([]byte, 0, 128+len(req.inputs)*(64+dims*12))
	b = append(b, `{"object":"list","data":[`...)
	tokens := 0
	for i, in := range req.inputs {
		tokens += in.tokenCount()
		in.vector(v)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if b64 {
			// Little-endian float32s, as OpenAI encodes them.
			for j, f := range v {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(f))
			}
			base64.StdEncoding.Encode(enc, raw)
			b = append(b, '"')
			b = append(b, enc...)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for j, f := range v {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendString(b, req.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, "}}"...)
	c.respond(http.StatusOK, "application/json", b)
}
