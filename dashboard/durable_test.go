package dashboard_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// In durable mode an operator action too few replicas acknowledged is
// answered as such (503, code "unacknowledged", saying it applied on the
// primary and may be lost in a failover), never as a success or as a
// ledger that could not be reached; so is each job of a bulk action.
func TestDurableActionUnacknowledgedIsSaid(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	cfg := jobs.Config{Namespace: redistest.Namespace(t), Sentinel: f.ClientOptions(),
		Durability: jobs.Durability{Replicas: 1, Timeout: time.Second}}
	client := jobs.NewClient(f.Client(), cfg)
	var ids []string
	for i := range 2 {
		r, err := client.Enqueue(ctx, echoArgs{N: i}, jobs.Delay(time.Hour))
		must(t, err)
		ids = append(ids, r.JobID)
	}
	h, err := dashboard.New(client.Inspector(), client, dashboard.Options{Token: token})
	must(t, err)

	f.CutReplication()
	req := httptest.NewRequest(http.MethodPost, "/api/jobs/default/"+ids[0]+"/cancel", strings.NewReader(`{"note":"cut"}`))
	req.Header.Set("Content-Type", "application/json")
	bearer(token)(req)
	res, body := call(t, h, req)
	if res.StatusCode != http.StatusServiceUnavailable || errCode(t, body) != "unacknowledged" || !strings.Contains(string(body), "applied on the primary") {
		t.Fatalf("cancel with replication cut: %d %s; want 503 unacknowledged, saying it applied on the primary", res.StatusCode, body)
	}
	req = httptest.NewRequest(http.MethodPost, "/api/bulk",
		strings.NewReader(`{"action":"cancel","note":"cut","jobs":[{"queue":"default","id":"`+ids[1]+`"}]}`))
	req.Header.Set("Content-Type", "application/json")
	bearer(token)(req)
	res, body = call(t, h, req)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"code":"unacknowledged"`) {
		t.Fatalf("bulk cancel with replication cut: %d %s; want the job failed unacknowledged", res.StatusCode, body)
	}
	if _, err := client.Cancel(ctx, "default", ids[1], "alice", "again"); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("the bulk cancel did not apply on the primary: %v", err)
	}
}
