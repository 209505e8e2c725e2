package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// loseReply lets the script call holding match run, then loses its reply,
// as a connection dropped after Redis did the work would.
type loseReply struct{ match string }

func (l *loseReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *loseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if (strings.HasPrefix(cmd.Name(), "eval") || strings.HasPrefix(cmd.Name(), "fcall")) && strings.Contains(fmt.Sprint(cmd.Args()), l.match) {
			cmd.SetErr(errors.New("read tcp 127.0.0.1:6379: i/o timeout"))
			return cmd.Err()
		}
		return err
	}
}

func (l *loseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestActionWithALostReplySaysItMayHaveApplied: an action whose reply from
// Redis was lost may have been done (here it was). The answer says so,
// and to look before acting again, rather than that the ledger could not
// be read, which tells the operator nothing happened.
func TestActionWithALostReplySaysItMayHaveApplied(t *testing.T) {
	f := newFixture(t)
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	f.rdb.AddHook(&loseReply{match: "lost-reply"})
	const want = "may have been done"

	dead := f.deadJob("default", "op-dead")
	rec, err := f.ledger.Get(t.Context(), "default", dead)
	must(t, err)
	res, b := act(t, h, "/api/jobs/default/"+dead+"/resolve",
		`{"decision":"rerun","note":"lost-reply","state":"dead","token":"`+rec.Token.String()+`","runs":0}`)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), want) {
		t.Errorf("re-run with its reply lost: %d %s (want 503 saying it %s)", res.StatusCode, b, want)
	}
	if st := f.state("default", dead); st != jobs.Pending {
		t.Fatalf("the re-run did not apply (%s): the test does not lose a reply", st)
	}

	res, b = act(t, h, "/api/queues/ops/pause", `{"note":"lost-reply"}`)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), want) {
		t.Errorf("pause with its reply lost: %d %s (want 503 saying it %s)", res.StatusCode, b, want)
	}

	id := f.enqueue(echoArgs{N: 1}, jobs.Delay(time.Hour))
	res, b = act(t, h, "/api/bulk", `{"action":"cancel","state":"pending","note":"lost-reply","jobs":[{"queue":"default","id":"`+id+`"}]}`)
	var br struct {
		Failed []struct{ Code, Error string }
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(b, &br) != nil || len(br.Failed) != 1 || !strings.Contains(br.Failed[0].Error, want) {
		t.Errorf("bulk cancel with its reply lost: %d %s (want the job listed as one that %s)", res.StatusCode, b, want)
	}
}
