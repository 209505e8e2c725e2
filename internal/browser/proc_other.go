//go:build !unix

package browser

import (
	"os"
	"os/exec"
)

// ownProcessGroup does nothing where process groups are not available.
func ownProcessGroup(*exec.Cmd) {}

// killProcessGroup kills Chromium.
func killProcessGroup(p *os.Process) { _ = p.Kill() }
