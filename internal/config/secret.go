package config

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxSecretFile bounds how much of a secret file is read, so a path such as
// /dev/zero fails instead of filling memory.
const maxSecretFile = 64 << 10

// Secret returns the credential's upstream secret: the value of the
// environment variable SecretEnv, or the content of the file SecretFile with
// surrounding whitespace trimmed (a relative path is relative to the working
// directory). lookupEnv is usually os.LookupEnv; nil means os.LookupEnv.
// Errors name the variable or file, never the value. An oauth credential
// has no static secret: "" (package oauth gives its access tokens).
func (c *Credential) Secret(lookupEnv func(string) (string, bool)) (string, error) {
	if c.OAuth.Set() {
		return "", nil
	}
	if c.AWS != nil {
		// The secret access key: it signs, and is never sent.
		s, err := c.AWS.secretAccessKey(lookupEnv)
		if err != nil {
			return "", fmt.Errorf("credential %q: aws: %w", c.ID, err)
		}
		return s, nil
	}
	s, err := readSecret(c.SecretEnv, c.SecretFile, lookupEnv)
	if err != nil {
		return "", fmt.Errorf("credential %q: %w", c.ID, err)
	}
	return s, nil
}

// Secret returns the static key's plaintext secret, read as for
// Credential.Secret. Errors name the variable or file, never the value.
func (k *Key) Secret(lookupEnv func(string) (string, bool)) (string, error) {
	s, err := readSecret(k.SecretEnv, k.SecretFile, lookupEnv)
	if err != nil {
		return "", fmt.Errorf("key %q: %w", k.ID, err)
	}
	return s, nil
}

// Secret returns the admin token's bearer secret, read as for
// Credential.Secret. Errors name the variable or file, never the value.
func (t *AdminToken) Secret(lookupEnv func(string) (string, bool)) (string, error) {
	s, err := readSecret(t.SecretEnv, t.SecretFile, lookupEnv)
	if err != nil {
		return "", fmt.Errorf("admin token %q: %w", t.ID, err)
	}
	return s, nil
}

// fieldError is a problem with one field of a record (or with the record,
// when field is empty); Validate prefixes the record's path to it.
type fieldError struct {
	field string
	msg   string
	err   error // cause, if any; it must not carry a secret either
}

func (e *fieldError) Error() string {
	if e.field == "" {
		return e.msg
	}
	return e.field + ": " + e.msg
}

func (e *fieldError) Unwrap() error { return e.err }

// LoadURL returns the database URL: url as written, the value of the
// environment variable url_env, or the content of the file url_file with
// surrounding whitespace trimmed. lookupEnv is usually os.LookupEnv; nil
// means os.LookupEnv. Errors name the variable or file, never the value.
func (d *Database) LoadURL(lookupEnv func(string) (string, bool)) (string, error) {
	u, _, err := readURL(d.URL, d.URLEnv, d.URLFile, lookupEnv)
	return u, err
}

// LoadURL returns the Redis URL, read as for Database.LoadURL.
func (r *Redis) LoadURL(lookupEnv func(string) (string, bool)) (string, error) {
	u, _, err := readURL(r.URL, r.URLEnv, r.URLFile, lookupEnv)
	return u, err
}

func readSecret(env, file string, lookupEnv func(string) (string, bool)) (string, error) {
	switch {
	case env != "" && file != "":
		return "", &fieldError{msg: "set only one of secret_env and secret_file"}
	case env != "":
		return readEnv("secret_env", env, lookupEnv)
	case file != "":
		return readSecretFile("secret_file", file)
	}
	return "", &fieldError{msg: "secret_env or secret_file is required"}
}

// readURL returns the URL given by exactly one of inline, env and file, and
// the field that gave it (url, url_env or url_file).
func readURL(inline, env, file string, lookupEnv func(string) (string, bool)) (u, field string, err error) {
	set := 0
	for _, s := range [...]string{inline, env, file} {
		if s != "" {
			set++
		}
	}
	switch {
	case set > 1:
		return "", "", &fieldError{msg: "set only one of url, url_env and url_file"}
	case inline != "":
		return inline, "url", nil
	case env != "":
		u, err = readEnv("url_env", env, lookupEnv)
		return strings.TrimSpace(u), "url_env", err
	case file != "":
		u, err = readSecretFile("url_file", file)
		return u, "url_file", err
	}
	return "", "", &fieldError{field: "url", msg: "required (or url_env, or url_file)"}
}

// readEnv returns the value of the environment variable name, which field
// of the record names.
func readEnv(field, name string, lookupEnv func(string) (string, bool)) (string, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	v, ok := lookupEnv(name)
	if !ok {
		return "", &fieldError{field: field, msg: fmt.Sprintf("environment variable %s is not set", name)}
	}
	if strings.TrimSpace(v) == "" {
		return "", &fieldError{field: field, msg: fmt.Sprintf("environment variable %s is empty", name)}
	}
	return v, nil
}

// readSecretFile returns the trimmed content of the file name, which field
// of the record names.
func readSecretFile(field, name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		// Open and read errors are *fs.PathError: the operation and the file, no content.
		return "", &fieldError{field: field, msg: err.Error(), err: err}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	switch {
	case err != nil:
		return "", &fieldError{field: field, msg: err.Error(), err: err}
	case len(b) > maxSecretFile:
		return "", &fieldError{field: field, msg: fmt.Sprintf("%s is larger than %d KiB", name, maxSecretFile>>10)}
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", &fieldError{field: field, msg: fmt.Sprintf("%s is empty", name)}
	}
	return s, nil
}
