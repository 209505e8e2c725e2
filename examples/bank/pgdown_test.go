package bank_test

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// pgProxy is a TCP proxy on loopback in front of PostgreSQL that the test
// can cut: armed with a pattern, it watches what clients send and, when the
// pattern passes, takes the database "down": every connection is closed and
// new ones are closed on accept until restore.
type pgProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[net.Conn]bool
	down    bool
	pattern []byte
	mode    string // cutDrop or cutReplyLost
	tripped chan struct{}
}

const (
	// cutDrop drops the message carrying the pattern: the server never
	// receives it.
	cutDrop = "drop"
	// cutReplyLost forwards it, discards the server's replies and cuts once
	// the server said it is ready for the next query: the server did the
	// work, the client never hears of it.
	cutReplyLost = "reply-lost"
)

// readyForQuery starts PostgreSQL's ReadyForQuery message ('Z', length 5),
// which ends the server's answer to a query.
var readyForQuery = []byte{'Z', 0, 0, 0, 5}

func startPGProxy(t *testing.T, target string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{ln: ln, target: target, conns: map[net.Conn]bool{}, tripped: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	return p
}

func (p *pgProxy) port() uint16 { return uint16(p.ln.Addr().(*net.TCPAddr).Port) }

// arm cuts the database when a client sends pattern.
func (p *pgProxy) arm(pattern, mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pattern, p.mode = []byte(pattern), mode
}

// cut closes every connection and refuses new ones until restore.
func (p *pgProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down && p.pattern != nil {
		close(p.tripped)
	}
	p.down, p.pattern = true, nil
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *pgProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func (p *pgProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

func (p *pgProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(client)
	}
}

func (p *pgProxy) handle(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	var dropReplies atomic.Bool
	go func() { // server -> client
		buf := make([]byte, 32<<10)
		var dropped []byte
		for {
			n, err := server.Read(buf)
			if n > 0 && dropReplies.Load() {
				// The answer to the forwarded message is complete: cut.
				if dropped = append(dropped, buf[:n]...); bytes.Contains(dropped, readyForQuery) {
					p.cut()
					break
				}
			} else if n > 0 {
				if _, werr := client.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = client.Close()
	}()
	buf := make([]byte, 32<<10)
	var prev []byte
	for { // client -> server
		n, err := client.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			pattern, mode := p.pattern, p.mode
			p.mu.Unlock()
			if pattern != nil && sends(prev, chunk, pattern) {
				if mode == cutDrop {
					p.cut()
					break
				}
				dropReplies.Store(true)
				_, _ = server.Write(chunk) // the server->client side cuts after the answer
				continue
			}
			if _, werr := server.Write(chunk); werr != nil {
				break
			}
			prev = append(prev[:0], chunk[max(0, n-64):]...)
		}
		if err != nil {
			break
		}
	}
	_ = server.Close()
	_ = client.Close()
}

// sends reports whether pattern ends inside chunk, prev being the tail of
// what was sent before (a message may be split between reads).
func sends(prev, chunk, pattern []byte) bool {
	joined := append(append([]byte{}, prev...), chunk...)
	for off := 0; ; {
		i := bytes.Index(joined[off:], pattern)
		if i < 0 {
			return false
		}
		if off+i+len(pattern) > len(prev) {
			return true
		}
		off += i + 1
	}
}

// TestPostgresUnavailableMidTransaction cuts PostgreSQL off in the middle
// of a transfer's pgfence transaction (issue 4): before the debit reaches
// the server, with the COMMIT lost on the way, and with the COMMIT
// executed but its reply lost.
//
// While the database is down, the job is uncertain (the outcome of a
// broken call is unknown, never a guessed success or failure) and the
// ledger never says succeeded while the effect log lacks the operation;
// where the transaction did not commit, the balances are unchanged. Once
// the database is back, the reconciler asks bank.Worker.Reconcile: a
// rolled-back transfer is re-run once with a new token, a committed one is
// marked succeeded without running again. Either way exactly one transfer
// is applied.
func TestPostgresUnavailableMidTransaction(t *testing.T) {
	cases := []struct {
		name, pattern, mode string
		committed           bool
	}{
		{"BeforeDebit", "balance = balance -", cutDrop, false},
		{"CommitLost", "commit", cutDrop, false},
		{"CommitReplyLost", "commit", cutReplyLost, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newBankEnv(t, "postgres")
			ctx := context.Background()
			cfg := e.pool.Config().Copy()
			proxy := startPGProxy(t, net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
			cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", proxy.port()
			cfg.ConnConfig.Fallbacks, cfg.ConnConfig.TLSConfig = nil, nil // plain bytes the proxy can read
			cfg.ConnConfig.ConnectTimeout = 2 * time.Second
			// Send every statement's text (no cached prepared statements), so
			// the pattern is seen on every execution.
			cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
			viaProxy, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(viaProxy.Close)
			store, err := bank.NewPostgresStore(ctx, viaProxy, pgfence.Options{})
			if err != nil {
				t.Fatal(err)
			}

			probe := &probeStore{Store: store, rdb: e.rdb, ns: e.ns, id: "P", mode: modeNormal}
			var once sync.Once
			w := &bank.Worker{Store: probe, BeforeWrite: func(ctx context.Context, j *jobs.Job[bank.Transfer]) {
				probe.beforeWrite(ctx, j)
				once.Do(func() { proxy.arm(tc.pattern, tc.mode) }) // the first attempt only
			}}
			logs := &syncbuf.Buffer{}
			p, err := worker.NewPool(e.rdb, e.poolConfig("P", logs))
			if err != nil {
				t.Fatal(err)
			}
			if err := worker.Register(p, jobs.Worker[bank.Transfer](w)); err != nil {
				t.Fatal(err)
			}
			e.run(p, logs)

			before := e.balances()
			x := bank.Transfer{From: "acct-002", To: "acct-003", Cents: 125}
			op := "xfer-pgdown-" + tc.name
			res := e.enqueue(x, op)
			e.watchSucceeded(res.JobID, op)
			select {
			case <-proxy.tripped:
			case <-time.After(30 * time.Second):
				t.Fatalf("the transfer never reached the cut; events %+v", e.events(nil))
			}
			first := e.waitEvent("first write", is("P", "write"))
			if first.Result == "applied" {
				t.Fatalf("the write succeeded through a cut connection: %+v", first)
			}
			if atCommit := tc.pattern == "commit"; strings.Contains(first.Result, "commit") != atCommit {
				t.Fatalf("the first attempt failed at the wrong step (at commit: %v): %s", atCommit, first.Result)
			}
			t.Logf("the first attempt's write failed: %s", first.Result)
			rec := jobstest.WaitState(t, e.ledger, queue, res.JobID, jobs.Uncertain)
			if rec.Attempts != 1 {
				t.Fatalf("uncertain job: %+v", rec)
			}
			// Down for a while: the reconciler looks twice (the second time
			// after its backoff) and cannot tell either time (each look is
			// recorded on the job), the job stays uncertain, and only a
			// committed transaction moved money.
			redistest.Await(t, e.rdb, e.ledger.JobKey(queue, res.JobID), "two reconciler looks while PostgreSQL is down", func() bool {
				r := e.get(res.JobID)
				return r.State != jobs.Uncertain || r.ReconcileTries >= 2
			})
			if r := e.get(res.JobID); r.State != jobs.Uncertain {
				t.Fatalf("while PostgreSQL is down the job is %s (after %d reconciler looks), want uncertain", r.State, r.ReconcileTries)
			}
			_, applied, err := e.store.Applied(ctx, op)
			if err != nil || applied != tc.committed {
				t.Fatalf("while down: effect applied=%v (%v), want %v", applied, err, tc.committed)
			}
			if !tc.committed {
				if now := e.balances(); bank.Total(now) != bank.Total(before) || now[x.From] != before[x.From] || now[x.To] != before[x.To] {
					t.Fatalf("a rolled-back transfer moved money: before %v, now %v", before, now)
				}
			}

			proxy.restore()
			rec = jobstest.WaitState(t, e.ledger, queue, res.JobID, jobs.Succeeded)
			e.wantOneTransfer(before, x)
			eff, ok, err := e.store.Applied(ctx, op)
			if err != nil || !ok || eff.Token != fenceOf(rec) || eff.Owner != fenceOwner(rec) {
				t.Fatalf("effect log %+v, %v, %v; want the succeeded attempt's fence %d of %s", eff, ok, err, fenceOf(rec), fenceOwner(rec))
			}
			writes := e.events(func(ev event) bool { return ev.Event == "write" && ev.Result == "applied" })
			wantAttempts, wantDecision, wantWrites := 2, jobs.DecideRerun, 1
			if tc.committed {
				wantAttempts, wantDecision, wantWrites = 1, jobs.DecideSucceeded, 0 // the write that committed never heard back
			}
			if rec.Attempts != wantAttempts || len(writes) != wantWrites {
				t.Fatalf("attempts %d, applied writes %d; want %d, %d", rec.Attempts, len(writes), wantAttempts, wantWrites)
			}
			var decided bool
			for _, en := range e.history(res.JobID) {
				if en.Event == "resolve" && en.Decision == string(wantDecision) {
					decided = true
				}
			}
			if !decided {
				t.Fatalf("no %s decision in the history:%s", wantDecision, jobstest.History(e.history(res.JobID)))
			}
		})
	}
}
