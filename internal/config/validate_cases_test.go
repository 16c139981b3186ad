package config

import (
	"strings"
	"testing"
)

// validateCase is one row of a table test of Validate: give changes a
// fresh base catalog, want is a substring of the error ("" = valid).
type validateCase struct {
	name string
	give func(c *Catalog)
	want string
}

// checkValidate runs each case as a subtest of its name.
func checkValidate(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base(t)
			tt.give(c)
			err := Validate(c, lookup(testEnv))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}
