package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/config"
)

// grant is a token endpoint's successful answer.
type grant struct {
	access  string
	refresh string // "" when the endpoint did not rotate it
	expires time.Duration
}

// defaultLifetime is assumed for an access token whose answer has no
// expires_in (RFC 6749 makes it optional) or one that is not a number.
const defaultLifetime = time.Hour

// maxLifetime caps the lifetime an answer claims: a day is longer than the
// tokens of every provider Sluice speaks to, and a larger expires_in
// (10000000000 seconds overflows a time.Duration) would otherwise put the
// expiry centuries away, or, overflowed, centuries ago.
const maxLifetime = 24 * time.Hour

// maxAnswer bounds what is read of a token endpoint's answer.
const maxAnswer = 64 << 10

// exchange asks the spec's token endpoint for an access token by the
// spec's grant (tokenRequest; refreshToken is the stored one, for the
// refresh_token grant): a POST, form-encoded or, when the spec says so, as
// a JSON object. Errors hold no token, secret or assertion, and none of the
// answer but its OAuth error code.
func (m *Manager) exchange(ctx context.Context, sp *Spec, refreshToken string) (grant, error) {
	params, err := m.tokenRequest(sp, refreshToken)
	if err != nil {
		return grant{}, err
	}
	payload, contentType := params.Encode(), "application/x-www-form-urlencoded"
	if sp.Body == config.OAuthBodyJSON {
		object := make(map[string]string, len(params))
		for name := range params {
			object[name] = params.Get(name)
		}
		b, _ := json.Marshal(object) // strings only: cannot fail
		payload, contentType = string(b), "application/json"
	}
	ctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sp.TokenEndpoint(), strings.NewReader(payload))
	if err != nil {
		return grant{}, errors.New("token_url is not a valid URL")
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	resp, err := m.o.Client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // the operation and the URL are said below
		}
		return grant{}, fmt.Errorf("POST token_url: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return grant{}, fmt.Errorf("reading the token endpoint's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if refused(sp, e.Error) && resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return grant{}, errInvalidGrant
		}
		return grant{}, fmt.Errorf("the token endpoint answered %d%s", resp.StatusCode, errorCode(e.Error))
	}
	var g struct {
		AccessToken  string          `json:"access_token"`
		TokenType    string          `json:"token_type"`
		ExpiresIn    json.RawMessage `json:"expires_in"` // a number; some endpoints send a string
		RefreshToken string          `json:"refresh_token"`
	}
	if err := json.Unmarshal(body, &g); err != nil || g.AccessToken == "" {
		return grant{}, errors.New("the token endpoint answered 200 without an access_token")
	}
	if g.TokenType != "" && !strings.EqualFold(g.TokenType, "bearer") {
		return grant{}, errors.New("the token endpoint issued a token that is not a bearer token")
	}
	return grant{access: g.AccessToken, refresh: g.RefreshToken, expires: lifetime(g.ExpiresIn)}, nil
}

// lifetime reads expires_in (seconds, a number or a string of one, which
// may have a fraction or an exponent; one out of float64's range is
// infinite): at most maxLifetime; 0 for a
// lifetime that is zero or negative (a token already expired);
// defaultLifetime when absent or not a number.
func lifetime(raw json.RawMessage) time.Duration {
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return defaultLifetime
	}
	secs, err := strconv.ParseFloat(string(n), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange): // json.Number admits no NaN or Inf
		return defaultLifetime
	case secs <= 0:
		return 0
	case secs >= maxLifetime.Seconds():
		return maxLifetime
	}
	return time.Duration(secs * float64(time.Second))
}

// errorCode renders an OAuth error code for a message: " (code)" with only
// the characters codes use (RFC 6749 §5.2), so that an answer cannot put
// anything else, such as a token, in a log.
func errorCode(code string) string {
	var b strings.Builder
	for _, r := range code {
		if b.Len() >= 64 {
			break
		}
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-' || r == '.' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return " (" + b.String() + ")"
}
