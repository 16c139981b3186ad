package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// readBody reads the request body, at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, &sluice.Error{Code: sluice.CodeRequestTooLarge, Msg: fmt.Sprintf("request body is larger than %d bytes", maxBody), Err: err}
	}
	if err != nil {
		return nil, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "could not read the request body", Err: err}
	}
	return b, nil
}

// decodeJSON decodes exactly one JSON object into v, refusing unknown
// fields and members repeated or not spelled exactly (spelledOnce). An
// empty body leaves v as it is when emptyOK, and is an error otherwise.
// Every admin body but the catalog's YAML is read here.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, emptyOK bool) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if emptyOK {
			return nil
		}
		return invalid("the request body is empty; want a JSON object")
	}
	if err := spelledOnce(json.NewDecoder(bytes.NewReader(b)), reflect.TypeOf(v), "", 0); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "invalid JSON body: " + strings.TrimPrefix(err.Error(), "json: "), Err: err}
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("invalid JSON body: unexpected data after the object")
	}
	return nil
}

// checkID reports whether an ID chosen by an operator is usable, by the
// catalog's rule for stable IDs (config.CheckID); empty is allowed.
func checkID(id string) error {
	if msg := config.CheckID(id); msg != "" {
		return invalid("id %s", msg)
	}
	return nil
}

// cleanModels trims the aliases and refuses empty ones.
func cleanModels(models []string) ([]string, error) {
	out := make([]string, 0, len(models))
	for i, m := range models {
		m = strings.TrimSpace(m)
		if m == "" {
			return nil, invalid("models[%d]: empty alias", i)
		}
		out = append(out, m)
	}
	return out, nil
}

// parseForce reads ?force=true (or false, or absent) of the writes that
// refuse to drop something without it.
func parseForce(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("force")
	if v == "" {
		return false, nil
	}
	force, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalid("force %q is not true or false", v)
	}
	return force, nil
}

// parseIfMatch reads an If-Match header holding a catalog version: `"3"`
// (or 3). Absent or "*" means no check (0).
func parseIfMatch(h string) (int64, error) {
	h = strings.TrimSpace(h)
	if h == "" || h == "*" {
		return 0, nil
	}
	v := h
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, invalid("If-Match %q is not a catalog version (want a quoted positive number, as in the ETag)", h)
	}
	return n, nil
}

// etag is the ETag of a catalog version.
func ETag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// SplitList splits "a, b,,c" into [a b c]: the
// lists of query parameters and command-line flags.
func SplitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
