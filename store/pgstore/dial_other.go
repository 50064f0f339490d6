//go:build !linux

package pgstore

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist: a
// vanished server is found by TCP keep-alive and retransmission limits
// alone there.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
