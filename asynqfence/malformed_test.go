package asynqfence_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedq/fencedq/asynqfence"
	"github.com/fencedq/fencedq/jobs"
)

// TestMalformedPayloadIsDeadAsNativePoolsMakeIt: a task whose payload does
// not decode into a typed worker's args is dead at once, with the reason
// and the rejection series native pools give a malformed payload, and the
// payload's values appear in neither the error nor the record.
func TestMalformedPayloadIsDeadAsNativePoolsMakeIt(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := &transferWorker{}
	p := startInProcessWith(t, asynqfence.Options{WorkerID: "in-process", Registerer: reg}, func(mux *asynq.ServeMux) {
		asynqfence.Handle(mux, jobs.Worker[transferArgs](w))
	})
	for i, payload := range []string{`{"cents":"4111-1111"}`, `[4111]`, `4111-1111 not json`} {
		id := []string{"m1", "m2", "m3"}[i]
		if _, err := p.client.Enqueue(asynq.NewTask("transfer", []byte(payload)), asynq.TaskID(id), asynq.MaxRetry(5)); err != nil {
			t.Fatal(err)
		}
		err := p.next()
		if !errors.Is(err, asynq.SkipRetry) || strings.Contains(err.Error(), "4111") {
			t.Fatalf("payload %s: returned %v; want dead, without the payload's values", payload, err)
		}
		rec := p.record(id)
		if rec.State != jobs.Dead || rec.Reason != "malformed payload" || rec.Attempts != 1 || strings.Contains(rec.Error, "4111") {
			t.Fatalf("payload %s: record %s, reason %q, %d attempts, error %q", payload, rec.State, rec.Reason, rec.Attempts, rec.Error)
		}
	}
	if w.runs.Load() != 0 {
		t.Fatal("the worker ran")
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var malformed float64
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if f.GetName() == "fencedq_jobs_rejected_total" && l.GetName() == "reason" && l.GetValue() == "malformed" {
					malformed += m.GetCounter().GetValue()
				}
			}
		}
	}
	if malformed != 3 {
		t.Fatalf("fencedq_jobs_rejected_total{reason=\"malformed\"} = %v, want 3", malformed)
	}
}
