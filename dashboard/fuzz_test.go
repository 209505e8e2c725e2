// FuzzAPICorruptRecords: the dashboard's JSON API over a ledger whose
// records are corrupt. As an ordinary test (go test ./dashboard/) it runs
// its seeds once; to fuzz for longer:
//
//	go test -run '^$' -fuzz=FuzzAPICorruptRecords -fuzztime=1m ./dashboard/
//
// A failing input is saved under testdata/fuzz/FuzzAPICorruptRecords/ and
// replayed by every later go test run until it passes. A hang shows as the
// test binary's timeout (go test -timeout).
package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// fuzzQueue is the queue the corrupt records are written to.
const fuzzQueue = "fz"

// jobFields are the fields of a job hash (jobs/ledger.go), each a target
// for a garbage value.
var jobFields = []string{"state", "kind", "payload", "args", "op", "resource", "max_retries", "timeout_ms", "token", "fence",
	"owner", "deadline", "attempts", "runs", "created", "run_at", "started", "finished", "error", "reason", "cancel",
	"uncertain_since", "reconcile_tries", "history", "bridge", "kind_defers", "updated"}

// FuzzAPICorruptRecords writes a job whose hash holds a garbage value in
// one field (field picks which; args replaces its payload and redacted
// args; entry is pushed as a history entry, an event, a schedule tick, a
// pool heartbeat and a history-chart bucket), index entries in every state
// without a record, and a schedule record with garbage, then reads every
// GET endpoint: each answers JSON with 200, 400, 404 or 503, never panics,
// and list pages stay bounded whatever the size of the args.
func FuzzAPICorruptRecords(f *testing.F) {
	huge := `{"blob":"` + strings.Repeat("x", 1<<20) + `"}`
	f.Add(uint8(0), []byte("succeeded"), []byte(`{"n":1}`), []byte(`{"event":"attempt","token":"12"}`))
	f.Add(uint8(0), []byte("no-such-state"), []byte(`null`), []byte(`not json`))
	f.Add(uint8(1), []byte("<script>alert(1)</script>"), []byte(`[1,2,3]`), []byte(`{"event":7,"at":"yesterday"}`))
	f.Add(uint8(2), []byte("\xff\xfe\x00"), []byte(`{"a":`), []byte(`{"at":-1e309}`))
	f.Add(uint8(8), []byte("-9223372036854775809"), []byte(huge), []byte(`{"event":"end","outcome":"uncertain","at":1e30}`))
	f.Add(uint8(10), []byte("1e400"), []byte(`{"deep":`+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+`}`), []byte(`[]`))
	f.Add(uint8(11), []byte("99999999999999999999999"), []byte("\"string\""), []byte(`{"tick":"x","job":{},"queue":"../.."}`))
	f.Add(uint8(13), []byte(""), []byte(""), []byte(""))
	f.Add(uint8(15), []byte("running"), []byte(`{"n":1}`), []byte(`{"id":"p","queues":{"q":"x"},"last_heartbeat":"never"}`))
	f.Add(uint8(14), []byte("99999999999999999"), []byte(`{"n":1}`), []byte(`{"event":"attempt","at":"99999999999999999"}`))
	f.Add(uint8(11), []byte("253402300800000"), []byte(`{"n":1}`), []byte(`{"tick":"253402300800000","at":"-5"}`))
	f.Add(uint8(21), []byte("pending"), []byte(`{"secret":"s"}`), []byte(`{"at":"2020-01-01T00:00:00Z","stats":{"succeeded":-5},"counts":{"review":"many"}}`))

	srv := redistest.Start(f, redistest.Options{})
	rdb := srv.Client()
	f.Cleanup(func() { _ = rdb.Close() })

	f.Fuzz(func(t *testing.T, field uint8, value, args, entry []byte) {
		ctx := context.Background()
		if err := rdb.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		const ns = "fuzz"
		client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
		defer client.Close()
		l := ledger.New(rdb, ledger.Config{Namespace: ns})
		res, err := client.EnqueueRaw(ctx, "echo", []byte(`{"n":1}`), jobs.Queue(fuzzQueue), jobs.OperationID("op-fuzz"), jobs.Unchecked())
		if err != nil {
			t.Fatal(err)
		}
		id := res.JobID
		key := l.JobKey(fuzzQueue, id)
		prefix := ns + ":{" + fuzzQueue + "}:"
		now := time.Now()
		pipe := rdb.Pipeline()
		pipe.HSet(ctx, key, jobFields[int(field)%len(jobFields)], value)
		pipe.HSet(ctx, key, "payload", args, "args", args)
		pipe.RPush(ctx, key+":history", entry, `{"event":"enqueued","at":"1"}`)
		pipe.LPush(ctx, prefix+"events", entry)
		pipe.HSet(ctx, prefix+"stats", "succeeded", value, "fenced_commit", "x")
		pipe.ZAdd(ctx, prefix+"series", redis.Z{Score: float64(now.Truncate(time.Minute).UnixMilli()), Member: entry})
		member := string(value)
		if member == "" {
			member = "empty"
		}
		for _, s := range jobs.States {
			// An entry without a record, one naming garbage, and the job
			// itself in every index (as a half-applied write could leave it).
			pipe.ZAdd(ctx, l.StateKey(fuzzQueue, s), redis.Z{Score: float64(now.UnixMilli()), Member: "orphan-" + string(s)},
				redis.Z{Score: -1, Member: member}, redis.Z{Score: 1e300, Member: id})
		}
		pipe.Set(ctx, l.OperationKey(fuzzQueue, "op-orphan"), "no-such-job", 0)
		pipe.Set(ctx, l.OperationKey(fuzzQueue, "op-garbage"), value, 0)
		pipe.Set(ctx, prefix+"paused", value, 0)
		pipe.SAdd(ctx, ns+":queues", fuzzQueue, member)
		pipe.ZAdd(ctx, ns+":pools", redis.Z{Score: float64(now.UnixMilli()), Member: "pool-x"}, redis.Z{Score: 0, Member: "pool-gone"})
		pipe.Set(ctx, ns+":pool:pool-x", entry, time.Minute)
		pipe.HSet(ctx, ns+":reconciler:status", "token", value, "last_scan", value, "leader", value)
		pp := ns + ":{periodic}:"
		pipe.SAdd(ctx, pp+"schedules", "sched", "sched-gone", member)
		pipe.HSet(ctx, pp+"schedule:sched", "schedule", value, "tz", value, "kind", value, "queue", value, "last_job", value,
			"last_tick", value, "next_tick", value, "enqueued", value, "leader", value, "seen", value)
		pipe.LPush(ctx, pp+"schedule:sched:ticks", entry, `{"tick":"1","job":"`+id+`","queue":"`+fuzzQueue+`"}`)
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}

		h, err := dashboard.New(client.Inspector(), client, dashboard.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		q := url.QueryEscape
		paths := []string{
			"/api/overview", "/api/stuck", "/api/pools", "/api/series?window=1h", "/api/series?window=24h&queue=" + fuzzQueue,
			"/api/schedules", "/api/schedules?id=sched&ticks=100",
			"/api/jobs/" + fuzzQueue + "/" + id, "/api/jobs/" + fuzzQueue + "/orphan-pending",
			"/api/search?q=" + id, "/api/search?q=op-", "/api/search?q=" + q(string(value)), "/api/search?q=op-orphan", "/api/search?q=op-garbage",
			"/api/events?queue=" + fuzzQueue, "/api/events?queue=" + fuzzQueue + "&type=fenced",
		}
		for _, s := range jobs.States {
			paths = append(paths, "/api/jobs?queue="+fuzzQueue+"&state="+string(s)+"&history=1&select=1",
				"/api/jobs?state="+string(s)+"&sort=desc&kind="+q(string(value)))
		}
		for _, p := range paths {
			res, body := call(t, h, httptest.NewRequest(http.MethodGet, p, nil))
			switch res.StatusCode {
			case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusServiceUnavailable:
			default:
				t.Fatalf("GET %s: status %d: %.500s", p, res.StatusCode, body)
			}
			if !json.Valid(body) {
				t.Fatalf("GET %s: not JSON: %.500s", p, body)
			}
			// A list carries previews, never whole payloads: 50 jobs of
			// 256-byte previews plus their fields stay far below 1 MiB.
			if strings.HasPrefix(p, "/api/jobs?") && len(body) > 512<<10 {
				t.Fatalf("GET %s: %d bytes", p, len(body))
			}
		}
	})
}
