package model

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
)

// HelperEnv is the environment variable that turns a re-executed test
// binary into a helper process of a linearizability test; its value is the
// JSON form of a Helper.
const HelperEnv = "FENCEDQ_LIN_HELPER"

// Helper tells a helper process what to run.
type Helper struct {
	Addr    string `json:"addr"`    // Redis
	NS      string `json:"ns"`      // key namespace
	Proc    int    `json:"proc"`    // process number (the parent is 0)
	Clients int    `json:"clients"` // goroutines
	Ops     int    `json:"ops"`     // operations per goroutine
	Broken  string `json:"broken"`  // a broken script to use ("" none)
	Out     string `json:"out"`     // where to write the history (JSON lines)
}

// HelperFromEnv returns the helper's task when this process is a helper.
func HelperFromEnv() (Helper, bool) {
	v := os.Getenv(HelperEnv)
	if v == "" {
		return Helper{}, false
	}
	var h Helper
	if err := json.Unmarshal([]byte(v), &h); err != nil {
		fmt.Fprintln(os.Stderr, "bad", HelperEnv, err)
		os.Exit(2)
	}
	return h, true
}

// Start runs the current test binary again as a helper process doing h.
func (h Helper) Start() (*exec.Cmd, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), HelperEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	return cmd, cmd.Start()
}

// Merge reads the helpers' history files and merges them with ops, in
// order of call time. Client numbers become unique: proc*1000 + client.
func Merge(ops []Op, files ...string) ([]Op, error) {
	all := append([]Op(nil), ops...)
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		more, err := ReadOps(f)
		_ = f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		all = append(all, more...)
	}
	for i := range all {
		all[i].Client = all[i].Proc*1000 + all[i].Client
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].Call < all[b].Call })
	return all, nil
}
