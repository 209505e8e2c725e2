package dashboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// degradedCluster is a three-master cluster where the master victim holds
// some of queue orders' six partitions and nothing else the overview reads:
// the namespace's keys, queue plain's, orders' own and the maintenance
// leader's lease are on another master, home.
type degradedCluster struct {
	master        func(key string) string // the address of the master holding key
	client        *jobs.Client
	victim        *redistest.Server
	orders, plain string
	lost          map[string]bool // the partitions victim holds
}

func startDegradedCluster(t *testing.T) *degradedCluster {
	t.Helper()
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	rdb, master := cl.Degradable()
	home := master("x:lease:{" + ledger.LeaderResource + "}")
	queue := func(prefix string) string {
		for i := 0; ; i++ {
			if q := fmt.Sprintf("%s%d", prefix, i); master("x:{"+q+"}:pending") == home {
				return q
			}
		}
	}
	d := &degradedCluster{master: master, orders: queue("orders"), plain: queue("plain"), lost: map[string]bool{}}
	ns := ""
	for i := 0; ns == ""; i++ {
		ns = fmt.Sprintf("%s-%d", redistest.Namespace(t), i)
		for _, k := range []string{ns + ":queues", ns + ":partitions", epoch.Key(ns), ns + ":reconciler:status", ns + ":pools"} {
			if master(k) != home {
				ns = ""
				break
			}
		}
	}
	d.client = jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	_, err := d.client.SetPartitions(ctx, d.orders, 6, "test", "")
	must(t, err)
	lay, err := d.client.Inspector().Partitions(ctx, d.orders)
	must(t, err)
	for _, p := range lay.Partitions {
		if p.Master == home {
			continue
		}
		if d.victim == nil {
			for _, n := range cl.Nodes {
				if n.Addr == p.Master {
					d.victim = n
				}
			}
		}
		if p.Master == d.victim.Addr {
			d.lost[p.Name] = true
		}
	}
	if d.victim == nil {
		t.Fatal("every partition is on the home master")
	}
	for i := range 12 {
		_, err := d.client.Enqueue(ctx, echoArgs{N: i}, jobs.Queue(d.orders))
		must(t, err)
	}
	for range 3 {
		_, err := d.client.Enqueue(ctx, echoArgs{N: 1}, jobs.Queue(d.plain))
		must(t, err)
	}
	return d
}

// TestOverviewWithAMasterDown: with one Cluster master killed, or stopped
// (SIGSTOP: it hangs), the overview still answers 200 with every queue:
// the plain queue's counts whole, the partitioned queue's partitions on
// the lost master marked unreachable (no counts), the others counted, and
// the answer flagged partial, naming the unreachable partitions.
func TestOverviewWithAMasterDown(t *testing.T) {
	for _, how := range []string{"killed", "stopped"} {
		t.Run(how, func(t *testing.T) {
			d := startDegradedCluster(t)
			h, err := dashboard.New(d.client.Inspector(), nil, dashboard.Options{Logger: slog.New(slog.DiscardHandler)})
			must(t, err)
			if how == "killed" {
				d.victim.Kill()
			} else {
				d.victim.Pause()
				t.Cleanup(d.victim.Resume)
			}
			var ov struct {
				Partial     bool     `json:"partial"`
				Unreachable []string `json:"unreachable"`
				Queues      []struct {
					Name        string         `json:"name"`
					Counts      map[string]int `json:"counts"`
					Unreachable []string       `json:"unreachable"`
					Partitions  []struct {
						Name        string         `json:"name"`
						Counts      map[string]int `json:"counts"`
						Unreachable bool           `json:"unreachable"`
					} `json:"partitions"`
				} `json:"queues"`
			}
			getJSON(t, h, "/api/overview", &ov)
			if !ov.Partial || len(ov.Unreachable) != len(d.lost) || len(ov.Queues) != 2 {
				t.Fatalf("overview %+v: want partial, naming the %d partitions lost, with both queues", ov, len(d.lost))
			}
			for _, q := range ov.Queues {
				switch q.Name {
				case d.plain:
					if q.Counts["pending"] != 3 || len(q.Unreachable) != 0 {
						t.Fatalf("queue %s: %+v, want its 3 pending jobs", q.Name, q)
					}
				case d.orders:
					pending := 0
					for _, p := range q.Partitions {
						if p.Unreachable != d.lost[p.Name] || p.Unreachable && p.Counts != nil {
							t.Fatalf("partition %+v: unreachable should be %v", p, d.lost[p.Name])
						}
						pending += p.Counts["pending"]
					}
					if len(q.Partitions) != 6 || len(q.Unreachable) != len(d.lost) || q.Counts["pending"] != pending || pending == 0 || pending >= 12 {
						t.Fatalf("queue %s: %+v: want the reachable partitions' jobs, the others marked", q.Name, q)
					}
				default:
					t.Fatalf("queue %q", q.Name)
				}
			}
		})
	}
}

// TestBrowserOverviewWithAMasterDown: with a Cluster master killed, the
// overview page renders its queues with a banner naming the unreachable
// partitions, and marks their rows, instead of showing only an error.
func TestBrowserOverviewWithAMasterDown(t *testing.T) {
	exe := browser.NeedChromium(t)
	d := startDegradedCluster(t)
	h, err := dashboard.New(d.client.Inspector(), nil, dashboard.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	d.victim.Kill()
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, hs.URL+"/#/"))
	waitJS(t, tb, "the overview with the partial banner", `!!document.querySelector('#queues') && !!document.querySelector('#partial')`)
	for name := range d.lost {
		waitJS(t, tb, "partition "+name+" marked unreachable",
			`!!document.querySelector('td.unreachable[data-unreachable='+CSS.escape(`+jsString(name)+`)+']') && document.getElementById('partial').textContent.includes(`+jsString(name)+`)`)
	}
	waitJS(t, tb, "queue "+d.plain+" counted", `document.querySelector('td[data-queue='+CSS.escape(`+jsString(d.plain)+`)+'][data-state=pending]').textContent === '3' && !document.querySelector('#main .error')`)
}

// TestPartitionedViewsWithAMasterDown: with the master holding some of
// queue orders' partitions killed, the views of orders over its partitions
// (its events, stuck jobs and history) answer 200 with what the others
// hold, flagged partial and naming the lost partitions, instead of a 503.
func TestPartitionedViewsWithAMasterDown(t *testing.T) {
	d := startDegradedCluster(t)
	h, err := dashboard.New(d.client.Inspector(), nil, dashboard.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	d.victim.Kill()
	for _, path := range []string{"/api/events?queue=", "/api/stuck?queue=", "/api/series?window=1h&queue="} {
		var v struct {
			Partial     bool     `json:"partial"`
			Unreachable []string `json:"unreachable"`
		}
		getJSON(t, h, path+d.orders, &v)
		if !v.Partial || len(v.Unreachable) != len(d.lost) {
			t.Fatalf("%s: %+v, want partial naming the %d partitions lost", path, v, len(d.lost))
		}
		for _, n := range v.Unreachable {
			if !d.lost[n] {
				t.Fatalf("%s: %+v names %s, which answers", path, v, n)
			}
		}
	}
}

// TestBrowserHistoryWithAMasterDown: with a Cluster master killed, the
// history page of a queue partitioned over it draws its charts under the
// banner every page shows for a partial answer, naming the lost partitions.
func TestBrowserHistoryWithAMasterDown(t *testing.T) {
	exe := browser.NeedChromium(t)
	d := startDegradedCluster(t)
	h, err := dashboard.New(d.client.Inspector(), nil, dashboard.Options{Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	d.victim.Kill()
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, hs.URL+"/#/history?queue="+d.orders))
	waitJS(t, tb, "the history with the partial banner", `document.getElementById('main').dataset.view === 'history' && !!document.querySelector('#partial') && !document.querySelector('#main .error')`)
	for name := range d.lost {
		waitJS(t, tb, "partition "+name+" named", `document.getElementById('partial').textContent.includes(`+jsString(name)+`)`)
	}
}
