package ledger_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestClaimReadsOnlyWhatItHandsOver: a claim of jobs as enqueued reads of
// each record only the fields it hands over or writes, not 'created' nor
// 'args' (no flow control needs them: a parked job's creation is read when
// it is parked); each field named costs Redis a scan of the record. Seen
// through MONITOR, which lists the commands a script runs.
func TestClaimReadsOnlyWhatItHandsOver(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	js := []*ledger.NewJob{
		{ID: "plain", Kind: "k", Queue: "q", Payload: []byte(`{"n":1}`), MaxRetries: 3},
		{ID: "limited", Kind: "k", Queue: "q", Payload: []byte(`{"n":2}`), MaxRetries: 3,
			Flow: &ledger.Flow{LimitKey: "l", LimitMax: 10}},
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	// the library loaded and the epoch learned before MONITOR starts
	if _, err := l.Claim(ctx, "other", "p", time.Minute, 1); err != nil {
		t.Fatal(err)
	}

	conn, err := net.Dial("tcp", srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if ok, err := rd.ReadString('\n'); err != nil || ok != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", ok, err)
	}
	r, err := l.Claim(ctx, "q", "p", time.Minute, 10)
	if err != nil || len(r.Jobs) != 2 {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	const done = "claim-done"
	if err := rdb.Echo(ctx, done).Err(); err != nil {
		t.Fatal(err)
	}
	var reads []string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("MONITOR after %d reads: %v", len(reads), err)
		}
		if strings.Contains(line, strconv.Quote(done)) {
			break
		}
		if strings.Contains(line, `"HMGET"`) && strings.Contains(line, `:job:`) {
			reads = append(reads, line)
		}
	}
	if len(reads) == 0 {
		t.Fatal("MONITOR showed no read of a job record")
	}
	for _, line := range reads {
		for _, f := range []string{"created", "args"} {
			if strings.Contains(line, strconv.Quote(f)) {
				t.Errorf("the claim read %q: %s", f, strings.TrimSpace(line))
			}
		}
	}
}

// TestClaimOfARecordWithoutItsCreationTime: a claim counts a record's
// 'created' and 'args' as present without reading them; a record that
// lacks them (edited by hand) is still read whole when it has other
// fields, so a storage mark on it still sets the floor of its next token.
func TestClaimOfARecordWithoutItsCreationTime(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	ns := redistest.Namespace(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	first := claimOne(ctx, t, l, "a")
	mark := uint64(first.Token) + 1_000_000_000
	if _, err := l.Insert(ctx, []*ledger.NewJob{{ID: "j", Kind: "k", Queue: "q", Payload: []byte(`{}`), MaxRetries: 3}}); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, "*"+ns+"*:job:j").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("job key: %v, %v", keys, err)
	}
	if err := rdb.HDel(ctx, keys[0], "created", "args").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, keys[0], "mark", fmt.Sprint(mark)).Err(); err != nil {
		t.Fatal(err)
	}
	if c := claimOne(ctx, t, l, ""); c.ID != "j" || uint64(c.Token) <= mark {
		t.Fatalf("claimed %s with token %d, want j above the storage mark %d", c.ID, c.Token, mark)
	}
}

// claimOne enqueues job id into queue q (none when id is "") and claims
// the one job q then holds.
func claimOne(ctx context.Context, t *testing.T, l *ledger.Ledger, id string) ledger.Claimed {
	t.Helper()
	if id != "" {
		if _, err := l.Insert(ctx, []*ledger.NewJob{{ID: id, Kind: "k", Queue: "q", Payload: []byte(`{}`), MaxRetries: 3}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := l.Claim(ctx, "q", "p", time.Minute, 10)
	if err != nil || len(r.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	return r.Jobs[0]
}
