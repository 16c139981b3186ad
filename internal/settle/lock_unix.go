//go:build unix

package settle

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive lock on f without waiting; held reports false
// when another open file (in this process or another) holds it. The kernel
// drops the lock when its holder dies, however it dies: that is how a
// spool left by a killed process is told from one in use.
func tryLock(f *os.File) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
