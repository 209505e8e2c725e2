//go:build linux

package main

import "syscall"

// childAttr puts a child in its own process group (a terminal's Ctrl-C
// reaches only the chaos run, which then cleans up) and kills it if the
// chaos run dies without cleaning up.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
