package bank_test

import (
	"syscall"
	"unsafe"
)

// waitStopped blocks until child process pid is stopped (SIGSTOP took
// effect in every thread: the kernel reports a group stop to the parent
// only once the last thread has stopped). waitid with WNOWAIT leaves the
// report in place and reaps nothing.
func waitStopped(pid int) error {
	const pPID = 1                              // idtype_t P_PID
	var info [128]byte                          // siginfo_t, unread
	flags := syscall.WSTOPPED | syscall.WNOWAIT // a stop, without consuming it
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)), uintptr(flags), 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}
