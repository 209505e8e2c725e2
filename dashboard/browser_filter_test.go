package dashboard_test

import (
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/internal/browser"
	"github.com/fencedq/fencedq/jobs"
)

// TestBrowserListFormShowsTheQueueFiltered: a list filtered on a queue
// the overview does not list as a row (a partition of a partitioned queue,
// linked from its count; a queue no job uses any more) keeps that queue
// in the filter form, so applying the form again (another state, say)
// does not silently widen the list, and a bulk action over it, to every
// queue.
func TestBrowserListFormShowsTheQueueFiltered(t *testing.T) {
	exe := browser.NeedChromium(t)
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.client.SetPartitions(ctx, "orders", 2, "test", ""); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		f.enqueue(echoArgs{N: 1}, jobs.Queue("orders"))
	}
	f.enqueue(echoArgs{N: 2})
	srv := httptest.NewServer(f.handler(dashboard.Options{}))
	t.Cleanup(srv.Close)
	tb, _ := openBrowser(t, exe)
	must(t, tb.page.Navigate(tb.ctx, srv.URL+"/#/"))
	waitJS(t, tb, "the partitions", `document.querySelectorAll('#queues tr.partition[data-partition]').length === 2`)
	part := evalJS[string](t, tb, `document.querySelector('#queues tr.partition[data-partition]').dataset.partition`)
	for _, q := range []string{part, "gone-queue"} {
		navigate(t, tb, "#/jobs?state=pending&queue="+url.QueryEscape(q))
		waitJS(t, tb, "the list of "+q, `document.getElementById('main').dataset.view === 'jobs' && document.querySelector('#main h1').textContent.includes(`+jsString("in queue "+q)+`)`)
		if got := evalJS[string](t, tb, `document.querySelector('#filters select[name=queue]').value`); got != q {
			t.Errorf("the list of queue %s shows %q in its queue filter", q, got)
		}
	}
}
