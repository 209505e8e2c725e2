package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MinRedisMajor and MinRedisMinor are the oldest Redis release the ledger
// runs on: its reads use ZRANGE ... BYSCORE LIMIT (Redis 6.2), which an
// older server refuses with a bare "ERR syntax error".
const (
	MinRedisMajor = 6
	MinRedisMinor = 2
)

// ErrRedisTooOld means the Redis server is older than MinRedisMajor.MinRedisMinor.
var ErrRedisTooOld = errors.New("jobs: the Redis server is too old")

// CheckVersion reads the server's version (INFO server) and returns an
// error matching ErrRedisTooOld, naming the version and the one needed,
// when it is older than MinRedisMajor.MinRedisMinor. A server whose
// version cannot be read (INFO renamed or disabled, a compatible server
// reporting none, a node not answering) passes: the calls that follow
// report their own errors.
func (l *Ledger) CheckVersion(ctx context.Context) error {
	info, err := l.rdb.Info(ctx, "server").Result()
	if err != nil {
		return nil
	}
	v, ok := versionOf(info)
	if !ok {
		return nil
	}
	if major, minor, ok := majorMinor(v); ok && (major < MinRedisMajor || major == MinRedisMajor && minor < MinRedisMinor) {
		return fmt.Errorf("%w: it is %s, and fencedq needs Redis %d.%d or later (its reads use ZRANGE ... BYSCORE LIMIT): upgrade it",
			ErrRedisTooOld, v, MinRedisMajor, MinRedisMinor)
	}
	return nil
}

// versionOf returns the redis_version field of an INFO reply.
func versionOf(info string) (string, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, v != ""
		}
	}
	return "", false
}

// majorMinor parses the first two numbers of a version "7.0.15".
func majorMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}
