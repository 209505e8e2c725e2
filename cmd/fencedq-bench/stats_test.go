package main

import (
	"crypto/sha1"
	"encoding/hex"
	"testing"
)

// TestScriptNames checks that a linked ledger script is named by its own
// header, not by a library linked before it.
func TestScriptNames(t *testing.T) {
	cases := map[string]string{
		"jobs:complete": "local EPOCH_RID = nil\n-- prelude.lua: shared\nlocal P = ARGV[1]\n" +
			"-- workflow.lua: the workflow definitions\nlocal w = 1\n-- flow.lua: limits\nlocal f = 1\n" +
			"-- complete.lua: apply a batch\nreturn 0\n",
		"jobs:claim":    "-- prelude.lua: shared\nlocal P = ARGV[1]\n-- claim.lua: the fenced claim\nreturn 0\n",
		"lease:acquire": "-- acquire.lua: take a free lease\nreturn 0\n",
		"lua:apply":     "-- apply.lua: a fenced write\nreturn 0\n",
	}
	for want, src := range cases {
		learnScript(src)
		sum := sha1.Sum([]byte(src))
		if got := scriptLabel(hex.EncodeToString(sum[:])); got != want {
			t.Errorf("script named %q, want %q", got, want)
		}
	}
}
