package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/authn"
	"github.com/sluicehq/sluice/internal/catalog"
)

// Codes only the admin API returns. Like sluice's codes they are public API:
// add codes, never rename one. Each maps to one HTTP status in adminStatus;
// the admin API also returns sluice.CodeInvalidRequest, CodeRequestTooLarge,
// CodeNotFound, CodeMethodNotAllowed and CodeInternal.
const (
	CodeUnauthorized           sluice.Code = "admin_unauthorized"        // 401
	CodeForbidden              sluice.Code = "admin_forbidden"           // 403: a read token asked to write
	CodeCatalogVersionConflict sluice.Code = "catalog_version_conflict"  // 412
	CodeCatalogInvalid         sluice.Code = "catalog_invalid"           // 422
	CodeCatalogReadOnly        sluice.Code = "catalog_read_only"         // 409
	CodeCatalogEmptied         sluice.Code = "catalog_emptied"           // 409: no models or keys; ?force=true applies it
	CodeKeyTransitionInvalid   sluice.Code = "key_transition_invalid"    // 409
	CodeKeyConflict            sluice.Code = "key_conflict"              // 409
	CodeKeyReadOnly            sluice.Code = "key_read_only"             // 409: declared in the catalog
	CodeCredentialClaimsHeld   sluice.Code = "credential_claims_held"    // 409
	CodeBillingAccountReadOnly sluice.Code = "billing_account_read_only" // 409: declared in the catalog
	CodeIdempotencyConflict    sluice.Code = "idempotency_key_reused"    // 409: the key made another entry
	CodePriceConflict          sluice.Code = "price_conflict"            // 409: that version exists with other rates
)

var adminStatus = map[sluice.Code]int{
	CodeUnauthorized:           http.StatusUnauthorized,
	CodeForbidden:              http.StatusForbidden,
	CodeCatalogVersionConflict: http.StatusPreconditionFailed,
	CodeCatalogInvalid:         http.StatusUnprocessableEntity,
	CodeCatalogReadOnly:        http.StatusConflict,
	CodeCatalogEmptied:         http.StatusConflict,
	CodeKeyTransitionInvalid:   http.StatusConflict,
	CodeKeyConflict:            http.StatusConflict,
	CodeKeyReadOnly:            http.StatusConflict,
	CodeCredentialClaimsHeld:   http.StatusConflict,
	CodeBillingAccountReadOnly: http.StatusConflict,
	CodeIdempotencyConflict:    http.StatusConflict,
	CodePriceConflict:          http.StatusConflict,
}

// statusOf is the HTTP status of an admin or sluice code.
func statusOf(c sluice.Code) int {
	if s, ok := adminStatus[c]; ok {
		return s
	}
	return c.Status()
}

// errorTypes gives each status the OpenAI error "type" SDKs expect.
var errorTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusMethodNotAllowed:      "invalid_request_error",
	http.StatusConflict:              "invalid_request_error",
	http.StatusPreconditionFailed:    "invalid_request_error",
	http.StatusRequestEntityTooLarge: "invalid_request_error",
	http.StatusUnprocessableEntity:   "invalid_request_error",
	http.StatusTooManyRequests:       "rate_limit_error",
}

// ErrorEnvelope is the OpenAI error body, as the admin API writes every
// error and its client reads them.
type ErrorEnvelope struct {
	Error struct {
		Message string      `json:"message"`
		Type    string      `json:"type"`
		Code    sluice.Code `json:"code"`
	} `json:"error"`
}

// writeError renders e in the OpenAI error envelope, with its
// Retry-After.
func writeError(w http.ResponseWriter, e *sluice.Error) {
	status := statusOf(e.Code)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	var env ErrorEnvelope
	env.Error.Message, env.Error.Code = e.Msg, e.Code
	env.Error.Type = errorTypes[status]
	if env.Error.Type == "" {
		env.Error.Type = "server_error"
	}
	writeJSON(w, status, env)
}

// writeJSON sends v with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // only our own view types reach here: a bug
		status, body = http.StatusInternalServerError, []byte(`{"error":{"message":"internal error","type":"server_error","code":"internal"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// asError returns err's public face: a *sluice.Error in the chain, else internal.
func asError(err error) *sluice.Error {
	if se, ok := errors.AsType[*sluice.Error](err); ok {
		return se
	}
	return &sluice.Error{Code: sluice.CodeInternal, Msg: "internal error", Err: err}
}

// invalid is a 400 invalid_request.
func invalid(format string, args ...any) error {
	return &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: fmt.Sprintf(format, args...)}
}

// keyError maps a Keyring error for the key id to its public face.
func keyError(id string, err error) error {
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return notFound("key", id, err)
	case errors.Is(err, authn.ErrStatic):
		return &sluice.Error{Code: CodeKeyReadOnly, Msg: fmt.Sprintf("key %q is declared in the catalog: change it there, not through the admin API", id), Err: err}
	case errors.Is(err, authn.ErrTransition):
		return &sluice.Error{Code: CodeKeyTransitionInvalid, Msg: err.Error(), Err: err}
	case errors.Is(err, catalog.ErrConflict):
		return &sluice.Error{Code: CodeKeyConflict, Msg: fmt.Sprintf("key %q conflicts with an existing key", id), Err: err}
	}
	return err
}

// poolError maps a Pool error for the account or credential id (kind says
// which) to its public face.
func poolError(kind, id string, err error) error {
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return notFound(kind, id, err)
	case errors.Is(err, ErrClaimsHeld):
		return &sluice.Error{Code: CodeCredentialClaimsHeld, Err: err, Msg: fmt.Sprintf(
			"%s %q still holds claims: drain it and remove it once its running work has finished, or force the remove while it drains (nothing new is sent to it at once; the work it runs finishes)", kind, id)}
	}
	return err
}

// notFound is a 404 for the key, account or credential id.
func notFound(kind, id string, err error) error {
	return &sluice.Error{Code: sluice.CodeNotFound, Msg: fmt.Sprintf("%s %q not found", kind, id), Err: err}
}

// catalogError maps a Catalog.Apply error to its public face. Anything that
// is not a conflict, a read-only catalog or already public is a problem with
// the document, shown in full.
func catalogError(err error) error {
	switch {
	case errors.Is(err, ErrCatalogReadOnly):
		return &sluice.Error{Code: CodeCatalogReadOnly, Msg: err.Error(), Err: err}
	case errors.Is(err, catalog.ErrConflict):
		return &sluice.Error{Code: CodeCatalogVersionConflict, Msg: err.Error(), Err: err}
	case errors.Is(err, ErrCatalogEmptied):
		return &sluice.Error{Code: CodeCatalogEmptied, Msg: err.Error() + "; apply it with ?force=true (sluice apply --force) if that is meant", Err: err}
	}
	if _, ok := errors.AsType[*sluice.Error](err); ok {
		return err
	}
	return &sluice.Error{Code: CodeCatalogInvalid, Msg: err.Error(), Err: err}
}
