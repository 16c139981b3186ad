//go:build !unix

package settle

import (
	"errors"
	"os"
)

// tryLock has no implementation here: without a lock the kernel drops when
// its holder dies, a live spool cannot be told from an abandoned one.
func tryLock(*os.File) (bool, error) {
	return false, errors.ErrUnsupported
}
