package main

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"
)

// TestScriptLabelIsTheScriptsOwn: a ledger script whose linked libraries
// carry their files' headers is named by its own header, the last one.
func TestScriptLabelIsTheScriptsOwn(t *testing.T) {
	src := "-- prelude.lua: shared\nlocal a = 1\n-- flow.lua: limits\nlocal b = 2\n-- group.lua: groups\nlocal c = 3\n-- claim.lua: the fenced claim\nreturn a + b + c\n"
	learnScript(src)
	if got := scriptLabel(hexSHA1(src)); got != "jobs:claim" {
		t.Fatalf("label %q, want jobs:claim", got)
	}
}

func hexSHA1(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
