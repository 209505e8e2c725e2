package ledger

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The operator views of flow control (Limits, Groups) list limit and rate
// keys and fair groups, which args methods may build from sensitive
// fields ("export:"+args.Email). Each listed one is shown as a job of it
// shows it (Record.Shown): its values that job's shown args redacted are
// replaced by Redacted. The job is one the view reads anyway (a key's
// oldest parked job or newest holder, a rate's next deferred or latest
// start, a group's head): nothing is written at enqueue, and the per-job
// path does no more work.

// keyProbe is a listed key (or group name), replaced by showKeys with how
// it is shown, and the job of it that shows it.
type keyProbe struct {
	key   *string
	job   string // "" when the view found none
	field string // the job's field holding the key: "lkey", "rkey" or "group"
	cmd   *redis.SliceCmd
}

// read queues on pipe the read of p's job in queue q (none when it has
// none).
func (p *keyProbe) read(ctx context.Context, l *Ledger, pipe redis.Pipeliner, q string) {
	if p.job != "" {
		p.cmd = pipe.HMGet(ctx, l.JobKey(q, p.job), p.field, "args", "payload")
	}
}

// show replaces p's key, once its read ran, by how it is shown.
func (p *keyProbe) show() {
	var f []any
	if p.cmd != nil {
		f = p.cmd.Val()
	}
	*p.key = shownKey(*p.key, f)
}

// shownKey returns key as a job of it shows it, from that job's fields
// (its key field, args and payload: nil when not read): with the values
// its shown args redacted replaced by Redacted (key itself when it had
// none). When no job of the key was read (gone, or since moved to another
// key) it could hold anything: it is shown as its name (up to its first
// ':') and a digest of it, stable while the process runs and keyed by a
// secret of the process, so a short value cannot be found by hashing
// guesses.
func shownKey(key string, f []any) string {
	if len(f) == 3 {
		own, _ := f[0].(string)
		args, _ := f[1].(string)
		payload, _ := f[2].(string)
		if own == key && args == "=" { // nothing of its args is redacted
			return key
		}
		if own == key && json.Valid([]byte(args)) {
			r := &Record{Args: json.RawMessage(args), Payload: []byte(payload)}
			return r.Shown(key)
		}
	}
	return keyDigest(key)
}

// digestKey keys the digests of keyDigest: drawn once per process.
var digestKey = rand.Text()

// keyDigest returns key's name (up to and including its first ':', ""
// when it has none) followed by Redacted with a short digest of key in it:
// "export:[redacted 1a2b3c4d]".
func keyDigest(key string) string {
	name, _, ok := strings.Cut(key, ":")
	if ok {
		name += ":"
	} else {
		name = ""
	}
	m := hmac.New(sha256.New, []byte(digestKey))
	m.Write([]byte(key))
	return name + "[redacted " + hex.EncodeToString(m.Sum(nil)[:4]) + "]"
}
