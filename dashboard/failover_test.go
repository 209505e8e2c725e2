package dashboard_test

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/syncbuf"
	"github.com/fencedq/fencedq/jobs"
)

// failoverTraces leaves what a Redis failover leaves for operators: a
// ledger rewind a pool detected (the queue's write sequence set back, as a
// promoted lagging replica would have it) and a pool whose clock is 10
// minutes behind Redis's (less 0.4 s: pages round it to 10m0s), having
// seen Redis's clock jump back.
func (f *fixture) failoverTraces() {
	t := f.t
	ctx := context.Background()
	pool := ledger.New(f.rdb, ledger.Config{Namespace: f.ns, Name: "pool-x"})
	job := func() []*ledger.NewJob {
		return []*ledger.NewJob{{ID: uuid.NewString(), Kind: "echo", Queue: "default", Payload: []byte(`{}`)}}
	}
	for range 3 {
		_, err := pool.Insert(ctx, job())
		must(t, err)
	}
	// What a promoted replica that missed the last writes holds.
	must(t, f.rdb.HSet(ctx, f.ledger.StateKey("default", "stats"), "seq", 1, "enqueued", 1).Err())
	_, err := pool.Insert(ctx, job())
	must(t, err)
	must(t, f.ledger.Heartbeat(ctx, jobs.PoolInfo{ID: "pool-x", Host: "h", PID: 1, Queues: map[string]int{"default": 1}, Concurrency: 2,
		Version: "v", Started: time.Now(), ClockJumps: 1,
		Clock: jobs.ClockSample{At: time.Now(), Redis: time.Now().Add(599_600 * time.Millisecond), OffsetMS: 599_600, RTTMS: 0.4}}, time.Minute))
}

// The API reports the traces: the rewind for the banner, the pool's clock
// on the pools and stuck pages.
func TestFailoverTracesInTheAPI(t *testing.T) {
	f := newFixture(t)
	f.failoverTraces()
	h := f.handler(dashboard.Options{})

	var rw struct {
		Rewinds []struct {
			Queue        string `json:"queue"`
			Known        int64  `json:"known"`
			Found        int64  `json:"found"`
			LostWrites   int64  `json:"lost_writes"`
			LostEnqueues int64  `json:"lost_enqueues"`
			DetectedBy   string `json:"detected_by"`
		} `json:"rewinds"`
		WindowHours int `json:"window_hours"`
	}
	getJSON(t, h, "/api/rewinds", &rw)
	if len(rw.Rewinds) != 1 || rw.WindowHours != 24 {
		t.Fatalf("rewinds: %+v", rw)
	}
	if r := rw.Rewinds[0]; r.Queue != "default" || r.Known != 3 || r.Found != 1 || r.LostWrites != 2 || r.LostEnqueues != 2 || r.DetectedBy != "pool-x" {
		t.Fatalf("rewind: %+v", r)
	}

	var pools struct {
		Pools []struct {
			ID    string `json:"id"`
			Clock struct {
				OffsetMS float64 `json:"offset_ms"`
			} `json:"clock"`
			ClockJumps int64 `json:"clock_jumps"`
			ClockWarn  bool  `json:"clock_warn"`
		} `json:"pools"`
		ClockWarnMS int64 `json:"clock_warn_ms"`
	}
	getJSON(t, h, "/api/pools", &pools)
	if len(pools.Pools) != 1 || pools.Pools[0].Clock.OffsetMS != 599_600 || !pools.Pools[0].ClockWarn || pools.Pools[0].ClockJumps != 1 ||
		pools.ClockWarnMS != jobs.ClockOffsetWarn.Milliseconds() {
		t.Fatalf("pools: %+v", pools)
	}

	var stuck struct {
		Clock struct {
			DashboardOffsetMS float64 `json:"dashboard_offset_ms"`
			DashboardRTTMS    float64 `json:"dashboard_rtt_ms"`
			Pools             []struct {
				Pool     string  `json:"pool"`
				OffsetMS float64 `json:"offset_ms"`
			} `json:"pools"`
			Warning string `json:"warning"`
		} `json:"clock"`
	}
	getJSON(t, h, "/api/stuck", &stuck)
	c := stuck.Clock
	if len(c.Pools) != 1 || c.Pools[0].Pool != "pool-x" || math.Abs(c.Pools[0].OffsetMS-599_600) > 1000 || c.DashboardRTTMS <= 0 ||
		!strings.Contains(c.Warning, "10m0s ahead of pool pool-x's") {
		t.Fatalf("stuck page's clock: %+v", c)
	}
}

// In the browser: the banner on every page names the rewound queue; the
// pools page flags the pool's clock; the stuck page says which clock its
// deadlines are on and warns about the pool's.
func TestBrowserFailoverTraces(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	f.failoverTraces()
	h := f.handler(dashboard.Options{Username: user, Password: pass})
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tb, watch := openBrowser(t, exe)

	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/ops/"))
	waitJS(t, tb, "the rewind banner", `!document.getElementById('banner').hidden && !!document.querySelector('#banner p.rewind[data-queue="default"]')`)
	if txt := evalJS[string](t, tb, `document.getElementById('banner').textContent`); !strings.Contains(txt, "Redis lost acknowledged writes") ||
		!strings.Contains(txt, "from write 3 to 1") || !strings.Contains(txt, "2 enqueued jobs lost") || !strings.Contains(txt, "found by pool-x") {
		t.Errorf("banner: %q", txt)
	}
	screenshot(t, tb, "rewind-banner.png")

	must(t, tb.page.Eval(tb.ctx, `location.hash = '#/pools'`, nil))
	waitJS(t, tb, "the pool's clock", `!!document.querySelector('#pools td[data-clock="pool-x"]')`)
	if cls := evalJS[string](t, tb, `document.querySelector('#pools td[data-clock="pool-x"]').className`); !strings.Contains(cls, "warn") {
		t.Errorf("the pool's clock cell is not flagged: class %q", cls)
	}
	if txt := evalJS[string](t, tb, `document.querySelector('#pools td[data-clock="pool-x"]').textContent`); txt != "+10m0s (1 jump back)" {
		t.Errorf("the pool's clock cell: %q", txt)
	}
	if !evalJS[bool](t, tb, `!document.getElementById('banner').hidden`) {
		t.Error("the banner is gone on the pools page")
	}
	screenshot(t, tb, "pools-clock.png")

	must(t, tb.page.Eval(tb.ctx, `location.hash = '#/stuck'`, nil))
	waitJS(t, tb, "the stuck page's clock line", `!!document.getElementById('stuck-clock')`)
	if txt := evalJS[string](t, tb, `document.getElementById('stuck-clock').textContent`); !strings.Contains(txt, "by the namespace's time") ||
		!strings.Contains(txt, "minus the pools': +10m0s") {
		t.Errorf("stuck clock line: %q", txt)
	}
	if txt := evalJS[string](t, tb, `(document.getElementById('stuck-clock-warning') || {}).textContent || ''`); !strings.Contains(txt, "10m0s ahead of pool pool-x's") {
		t.Errorf("stuck clock warning: %q", txt)
	}
	screenshot(t, tb, "stuck-clock.png")
	if p := watch.list(); len(p) > 0 {
		t.Fatalf("the page misbehaved:\n%s", strings.Join(p, "\n"))
	}
}

// TestClockJumpHeldByTheNamespaceOffset: Redis's clock steps 10 minutes back
// and a pool counts the jump, but the namespace's time, which the stuck
// page's deadlines are on, goes on from where it was through its offset.
// The page measures that time, not Redis's clock, against this dashboard's
// and the pool's clocks, and says the deadlines did not move.
func TestClockJumpHeldByTheNamespaceOffset(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	rdb := srv.Client()
	f := &fixture{t: t, rdb: rdb, ns: redistest.Namespace(t), logs: &syncbuf.Buffer{}}
	f.client = jobs.NewClient(rdb, jobs.Config{Namespace: f.ns})
	t.Cleanup(func() { _ = f.client.Close() })
	f.insp = f.client.Inspector()
	pool := ledger.New(rdb, ledger.Config{Namespace: f.ns, Name: "pool-y"})
	if _, err := pool.ServerTime(ctx); err != nil { // a write: the namespace's time starts on Redis's clock
		t.Fatal(err)
	}
	srv.SetClockOffset(-10 * time.Minute)
	s, err := pool.Clock(ctx)
	must(t, err)
	if s.Offset() > -9*time.Minute {
		t.Fatalf("Redis's clock after the step back: %+v", s)
	}
	must(t, pool.Heartbeat(ctx, jobs.PoolInfo{ID: "pool-y", Host: "h", PID: 1, Queues: map[string]int{"default": 1}, Concurrency: 1,
		Version: "v", Started: time.Now(), ClockJumps: 1, Clock: s}, time.Minute))

	var stuck struct {
		Clock struct {
			DashboardOffsetMS float64 `json:"dashboard_offset_ms"`
			NamespaceOffsetMS float64 `json:"namespace_offset_ms"`
			Pools             []struct {
				Pool     string  `json:"pool"`
				OffsetMS float64 `json:"offset_ms"`
			} `json:"pools"`
			Warning string `json:"warning"`
		} `json:"clock"`
	}
	getJSON(t, f.handler(dashboard.Options{}), "/api/stuck", &stuck)
	c := stuck.Clock
	minute := float64(time.Minute.Milliseconds())
	if math.Abs(c.DashboardOffsetMS) > minute || c.NamespaceOffsetMS < 9*minute || len(c.Pools) != 1 || math.Abs(c.Pools[0].OffsetMS) > minute {
		t.Fatalf("stuck page's clock %+v: want the namespace's time near this dashboard's and the pool's clocks, 10 minutes ahead of Redis's", c)
	}
	if !strings.Contains(c.Warning, "jump backwards") || !strings.Contains(c.Warning, "no deadline or due time moved") ||
		!strings.Contains(c.Warning, "ahead of Redis's clock") || strings.Contains(c.Warning, "end later") {
		t.Fatalf("stuck page's warning: %q", c.Warning)
	}
}
