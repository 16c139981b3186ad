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
// Errors name the variable or file, never the value.
func (c *Credential) Secret(lookupEnv func(string) (string, bool)) (string, error) {
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

func readSecret(env, file string, lookupEnv func(string) (string, bool)) (string, error) {
	switch {
	case env != "" && file != "":
		return "", &fieldError{msg: "set only one of secret_env and secret_file"}
	case env != "":
		if lookupEnv == nil {
			lookupEnv = os.LookupEnv
		}
		v, ok := lookupEnv(env)
		if !ok {
			return "", &fieldError{field: "secret_env", msg: fmt.Sprintf("environment variable %s is not set", env)}
		}
		if strings.TrimSpace(v) == "" {
			return "", &fieldError{field: "secret_env", msg: fmt.Sprintf("environment variable %s is empty", env)}
		}
		return v, nil
	case file != "":
		return readSecretFile(file)
	}
	return "", &fieldError{msg: "secret_env or secret_file is required"}
}

func readSecretFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		// Open and read errors are *fs.PathError: the operation and the file, no content.
		return "", &fieldError{field: "secret_file", msg: err.Error(), err: err}
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	switch {
	case err != nil:
		return "", &fieldError{field: "secret_file", msg: err.Error(), err: err}
	case len(b) > maxSecretFile:
		return "", &fieldError{field: "secret_file", msg: fmt.Sprintf("%s is larger than %d KiB", name, maxSecretFile>>10)}
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", &fieldError{field: "secret_file", msg: fmt.Sprintf("%s is empty", name)}
	}
	return s, nil
}
