package worker

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestReadTimeoutDefaultDocumented checks that every place stating the Redis
// client's default ReadTimeout (the bound on a call waiting for a frozen
// Redis during shutdown) states go-redis's real default.
func TestReadTimeoutDefaultDocumented(t *testing.T) {
	def := redis.NewClient(&redis.Options{}).Options().ReadTimeout
	want := fmt.Sprintf("%ds by default", int(def.Seconds()))
	stated := regexp.MustCompile("ReadTimeout`?, (\\d+ ?s) by default")
	for _, file := range []string{"../README.md", "pool.go"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(strings.ReplaceAll(string(raw), "//", "")), " ")
		ms := stated.FindAllStringSubmatch(text, -1)
		if len(ms) == 0 {
			t.Errorf("%s states no default ReadTimeout", file)
		}
		for _, m := range ms {
			if strings.ReplaceAll(m[1], " ", "")+" by default" != want {
				t.Errorf("%s says the Redis client's ReadTimeout is %s by default; go-redis's is %v", file, m[1], def)
			}
		}
	}
}
