//go:build unix

package tempfile

import (
	"errors"
	"syscall"
)

// alive says whether process pid exists: signal 0 checks without
// sending, and EPERM means it exists under another user.
func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
