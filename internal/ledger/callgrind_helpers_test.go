package ledger_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// callgrindServer connects to the redis-server under callgrind named by
// FENCEDQ_CALLGRIND (address,pid,dump directory), skipping the test when it
// is not set, and returns a client and dump: the instructions the server
// ran since the previous dump. FENCEDQ_CALLGRIND_KEEP=<name> keeps the
// dumps as <name>.<n> for callgrind_annotate; they are removed otherwise.
func callgrindServer(t *testing.T, readTimeout time.Duration) (rdb *redis.Client, dump func() float64) {
	conf := strings.Split(os.Getenv("FENCEDQ_CALLGRIND"), ",")
	if len(conf) != 3 {
		t.Skip("FENCEDQ_CALLGRIND (address,pid,dump directory) not set")
	}
	addr, pid, dir := conf[0], conf[1], conf[2]
	rdb = redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: readTimeout})
	total := regexp.MustCompile(`(?m)^(?:summary|totals): (\d+)`)
	kept := 0
	dump = func() float64 {
		t.Helper()
		if out, err := exec.Command("callgrind_control", "-d", pid).CombinedOutput(); err != nil {
			t.Fatalf("callgrind_control: %v: %s", err, out)
		}
		fs, _ := filepath.Glob(filepath.Join(dir, "cg."+pid+".*"))
		var newest string
		var at time.Time
		for _, f := range fs {
			if st, err := os.Stat(f); err == nil && st.ModTime().After(at) {
				at, newest = st.ModTime(), f
			}
		}
		b, err := os.ReadFile(newest)
		if err != nil {
			t.Fatal(err)
		}
		if keep := os.Getenv("FENCEDQ_CALLGRIND_KEEP"); keep != "" {
			_ = os.Rename(newest, filepath.Join(dir, keep+"."+strconv.Itoa(kept)))
			kept++
		} else {
			_ = os.Remove(newest)
		}
		m := total.FindSubmatch(b)
		if m == nil {
			t.Fatalf("no totals in %s", newest)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	return rdb, dump
}
