package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// keyGuardLua defines key_guard(key, type, ...) for the scripts written
// here rather than in lua/: it fails the call, before its first write,
// when one of the keys holds another type than the one given (written by
// hand, or by something else), as queue_guard in prelude.lua does for the
// library's scripts. Redis keeps a script's writes before an error, so a
// call failing at such a key after writing would leave part of its work.
// The error's text begins with FOREIGNKEY (ErrForeignKey, see wrap).
const keyGuardLua = `
local function key_guard(...)
  local a = {...}
  for i = 1, #a, 2 do
    local t = redis.call('TYPE', a[i])['ok']
    if t ~= 'none' and t ~= a[i + 1] then
      error({err = 'FOREIGNKEY the key ' .. a[i] .. ' holds another type than a ' .. a[i + 1] ..
        ': nothing was written'})
    end
  end
end
`

// queueKeyTypes are the queue-level keys the scripts write, with their
// types: those queue_guard in prelude.lua checks, but for the per-minute
// counters (a key per minute).
var queueKeyTypes = []struct{ name, typ string }{
	{string(Pending), "zset"}, {string(Running), "zset"}, {string(Uncertain), "zset"},
	{string(Review), "zset"}, {string(Succeeded), "zset"}, {string(Dead), "zset"},
	{string(Cancelled), "zset"}, {"stats", "hash"}, {"events", "list"}, {"limits", "hash"},
	{"rates", "hash"}, {"groups", "hash"}, {"handover", "hash"}, {"wf_part", "hash"},
	{"waiting", "zset"}, {changedKey, "set"},
}

// CheckQueueKeys reports, with an error matching ErrForeignKey naming each,
// the queue-level keys of qs holding another type than the scripts write
// there (written by hand, or by something else): the hot paths do not
// check them per call, and fail at such a key with WRONGTYPE, possibly
// after writing part of their batch. One pipelined round trip of TYPE
// reads, for a pool's start.
func (l *Ledger) CheckQueueKeys(ctx context.Context, qs ...string) error {
	if len(qs) == 0 {
		return nil
	}
	pipe := l.rdb.Pipeline()
	cmds := make([]*redis.StatusCmd, 0, len(qs)*len(queueKeyTypes))
	for _, q := range qs {
		for _, k := range queueKeyTypes {
			cmds = append(cmds, pipe.Type(ctx, l.prefix(q)+k.name))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap("check queue keys", err)
	}
	var errs []error
	for i, c := range cmds {
		want := queueKeyTypes[i%len(queueKeyTypes)].typ
		if t := c.Val(); t != "none" && t != want {
			errs = append(errs, fmt.Errorf("%w: the queue key %s holds a %s, not a %s", ErrForeignKey, c.Args()[1], t, want))
		}
	}
	return errors.Join(errs...)
}
