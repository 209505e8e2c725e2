//go:build !linux

package main

import "syscall"

// childAttr puts a child in its own process group (a terminal's Ctrl-C
// reaches only the chaos run, which then cleans up).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
