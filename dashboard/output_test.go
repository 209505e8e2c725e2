package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/workflow"
)

// The job view carries the output a success recorded, redacted as stored.
func TestJobViewShowsTheOutput(t *testing.T) {
	f := newFixture(t)
	id := f.enqueue(echoArgs{N: 1})
	c := f.claimOne("default", id, "w", time.Minute)
	raw, shown := []byte(`{"card":"4242","amount":2}`), []byte(`{"amount":2,"card":"[redacted]"}`)
	if _, err := f.ledger.Complete(context.Background(), "default", []ledger.Completion{{ID: id, Token: c.Token,
		Outcome: ledger.Outcome{To: ledger.Succeeded, Output: raw, OutputDisplay: shown}}}); err != nil {
		t.Fatal(err)
	}
	h := f.handler(dashboard.Options{})
	var d struct {
		Job struct {
			Output map[string]any `json:"output"`
		} `json:"job"`
	}
	body := getJSON(t, h, "/api/jobs/default/"+id, &d)
	if d.Job.Output["amount"] != float64(2) || d.Job.Output["card"] != "[redacted]" || strings.Contains(string(body), "4242") {
		t.Fatalf("job view: %s", body)
	}
}

// The workflows API lists workflows with their progress and shows one
// with its steps.
func TestWorkflowsAPI(t *testing.T) {
	f := newFixture(t)
	res, err := workflow.Enqueue(context.Background(), f.client, workflow.New("order").
		Add("charge", echoArgs{N: 1}).
		Add("ship", echoArgs{N: 2, Secret: secret}, workflow.After("charge")))
	if err != nil {
		t.Fatal(err)
	}
	h := f.handler(dashboard.Options{})
	var l struct {
		Workflows []workflow.Status `json:"workflows"`
	}
	getJSON(t, h, "/api/workflows", &l)
	if len(l.Workflows) != 1 || l.Workflows[0].ID != res.ID || l.Workflows[0].Total != 2 || l.Workflows[0].State != workflow.Running {
		t.Fatalf("list: %+v", l)
	}
	var st workflow.Status
	body := getJSON(t, h, "/api/workflows?id="+res.ID, &st)
	if len(st.Steps) != 2 || st.Steps[1].State != "waiting" || st.Steps[1].Deps[0] != "charge" || strings.Contains(string(body), secret) {
		t.Fatalf("workflow: %s", body)
	}
	if r, _ := call(t, h, httptest.NewRequest(http.MethodGet, "/api/workflows?id=nope", nil)); r.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown workflow: %d", r.StatusCode)
	}
	// the waiting step is counted with the queue's jobs and listed by state
	var ov overviewJSON
	getJSON(t, h, "/api/overview", &ov)
	if len(ov.Queues) != 1 || ov.Queues[0].Counts["waiting"] != 1 || ov.Queues[0].Counts["pending"] != 1 {
		t.Fatalf("overview counts: %+v", ov.Queues)
	}
	var list listJSON
	getJSON(t, h, "/api/jobs?queue=default&state=waiting", &list)
	if list.Total != 1 || len(list.Jobs) != 1 || list.Jobs[0].ID != res.Steps["ship"].JobID {
		t.Fatalf("waiting jobs: %+v", list)
	}
}

// countWorkflowReads counts the workflow records read (HGETALL of a
// wf: key) through the client it is added to.
type countWorkflowReads struct{ n atomic.Int64 }

func (c *countWorkflowReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *countWorkflowReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "hgetall" && len(args) > 1 {
			if k, _ := args[1].(string); strings.Contains(k, ":wf:") {
				c.n.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}

func (c *countWorkflowReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The workflows API reads the workflows it lists, no more: with homes in
// several queues, limit=2 reads two records (and their steps), not two of
// every queue; and it lists 100 at most.
func TestWorkflowsAPIReadsOnlyWhatItLists(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	created := map[string]int64{} // workflow id → its creation (ms)
	for i := range 101 {
		home := "home-" + strconv.Itoa(i%3)
		res, err := workflow.Enqueue(ctx, f.client, workflow.New("order").
			Add("charge", echoArgs{N: i}, workflow.Options(jobs.Queue(home))))
		if err != nil {
			t.Fatal(err)
		}
		created[res.ID] = int64(f.rdb.ZScore(ctx, f.ns+":{"+home+"}:workflows", res.ID).Val())
	}
	h := f.handler(dashboard.Options{})
	hook := &countWorkflowReads{}
	f.rdb.AddHook(hook)
	var l struct {
		Workflows []workflow.Status `json:"workflows"`
	}
	getJSON(t, h, "/api/workflows?limit=2", &l)
	if len(l.Workflows) != 2 || l.Workflows[0].ID == l.Workflows[1].ID {
		t.Fatalf("limit=2 listed %+v", l.Workflows)
	}
	last := created[l.Workflows[1].ID]
	for id, at := range created {
		if id != l.Workflows[0].ID && id != l.Workflows[1].ID && at > last || created[l.Workflows[0].ID] < last {
			t.Fatalf("limit=2 listed %+v, not the newest two of %v", l.Workflows, created)
		}
	}
	if n := hook.n.Load(); n != 2 {
		t.Fatalf("limit=2 read %d workflow records, want 2", n)
	}
	// the largest limit lists (and reads) 100
	hook.n.Store(0)
	getJSON(t, h, "/api/workflows?limit=100", &l)
	if len(l.Workflows) != 100 || hook.n.Load() != 100 {
		t.Fatalf("limit=100 listed %d workflows, read %d records; want 100 each", len(l.Workflows), hook.n.Load())
	}
}
