package main

import "syscall"

// childAttr puts a child in its own process group and asks the kernel to
// kill it if the benchmark dies without cleaning up.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
