package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/jobs"
)

// MemFigures is one system's memory per retained finished job.
type MemFigures struct {
	// BytesPerJob is the median of (Δused_memory − Δmem_clients_normal) / jobs
	// minus PayloadBytes: what retaining one finished job costs beyond its args.
	BytesPerJob float64 `json:"bytes_per_job"`
	// GrossBytesPerJob is the same before subtracting the payload.
	GrossBytesPerJob float64 `json:"gross_bytes_per_job"`
	// PayloadBytes is the args bytes stored per job (fencedq keeps the JSON
	// args twice: to run and, redacted, to show; asynq once).
	PayloadBytes float64 `json:"payload_bytes_per_job"`
	// Runs lists BytesPerJob of every repetition.
	Runs []float64 `json:"runs_bytes_per_job"`
	// Keys is MEMORY USAGE per job by kind of key, averaged over a sample;
	// "unattributed" is GrossBytesPerJob minus their sum (the keyspace's
	// dict entries, expiry entries and allocator rounding).
	Keys map[string]float64 `json:"memory_usage_by_key"`
	// Fields is the bytes of one sampled record's fields (name + value).
	Fields map[string]int `json:"record_field_bytes,omitempty"`
}

// MemoryResult is the memory section.
type MemoryResult struct {
	Jobs   int `json:"jobs"`
	Repeat int `json:"repeat"`
	// Fencedq retains each succeeded job (job hash and succeeded index; a
	// history list only beyond the common path) for jobs.Config.Retention
	// (default 7 days). Its jobs carry no OperationID, as asynq's carry no
	// TaskID.
	Fencedq MemFigures `json:"fencedq"`
	// FencedqOperationID is the same with a caller-given OperationID per
	// job ("bench-op-N"), which names the job ("=default=bench-op-N", see
	// ledger.OpJobID) instead of adding an operation key.
	FencedqOperationID MemFigures `json:"fencedq_operation_id"`
	// AsynqRetained is plain asynq with asynq.Retention(7 days), which keeps
	// completed tasks; plain asynq without Retention keeps nothing.
	AsynqRetained MemFigures `json:"asynq_retained"`
	// Ratio is fencedq bytes per job ÷ asynq's (lower is leaner; target ≤
	// Target).
	Ratio       float64 `json:"ratio"`
	Target      float64 `json:"target"`
	MeetsTarget bool    `json:"meets_target"`
	// RatioOperationID is FencedqOperationID ÷ asynq's.
	RatioOperationID float64 `json:"ratio_operation_id"`
}

func (e *bench) memory(ctx context.Context) (*MemoryResult, error) {
	n := e.opts.memoryJobs
	t := e.single
	r := &MemoryResult{Jobs: n, Repeat: e.opts.repeat, Target: 1.0}
	payload := 0.0
	for i := range n {
		b, _ := json.Marshal(noopArgs{N: i})
		payload += float64(len(b))
	}
	payload /= float64(n)
	// Warm up: scripts cached, connections open, asynq's per-queue counters exist.
	for _, fn := range []drainFunc{asynqDrain, fencedqDrain} {
		if _, err := fn(ctx, t, []string{"default"}, 50, e.opts.concurrency, &drainOpts{asynqRetention: 7 * 24 * time.Hour}); err != nil {
			return nil, err
		}
	}
	// fencedq keeps a redacted display copy of the args only where it
	// differs from the args.
	fencedqCopies := 1.0
	if shown, err := jobs.RedactJSON(noopArgs{N: 1}); err == nil {
		if raw, _ := json.Marshal(noopArgs{N: 1}); string(shown) != string(raw) {
			fencedqCopies = 2
		}
	}
	measure := func(fn drainFunc, stored float64, fqOpts func(int) []jobs.Option, keys func(ctx context.Context, d *drained) (map[string]float64, map[string]int, error)) (MemFigures, error) {
		var f MemFigures
		var gross []float64
		for range e.opts.repeat {
			var before serverSnap
			var perJob float64
			o := &drainOpts{
				asynqRetention: 7 * 24 * time.Hour,
				fencedqOptions: fqOpts,
				before: func(ctx context.Context) (err error) {
					before, err = serverStats(ctx, t.rdb)
					return err
				},
				after: func(ctx context.Context, d *drained) error {
					time.Sleep(200 * time.Millisecond) // let the last connections go idle
					after, err := serverStats(ctx, t.rdb)
					if err != nil {
						return err
					}
					perJob = float64((after.usedMemory-before.usedMemory)-(after.clientsMem-before.clientsMem)) / float64(n)
					if f.Keys == nil {
						f.Keys, f.Fields, err = keys(ctx, d)
						sum := 0.0
						for _, v := range f.Keys {
							sum += v
						}
						f.Keys["unattributed"] = round(perJob-sum, 1)
					}
					return err
				},
			}
			if _, err := fn(ctx, t, []string{"default"}, n, e.opts.concurrency, o); err != nil {
				return f, err
			}
			gross = append(gross, perJob)
			f.Runs = append(f.Runs, round(perJob-stored, 1))
		}
		f.GrossBytesPerJob = round(median(gross), 1)
		f.PayloadBytes = round(stored, 1)
		f.BytesPerJob = round(median(gross)-stored, 1)
		return f, nil
	}
	var err error
	r.Fencedq, err = measure(fencedqDrain, fencedqCopies*payload, nil, e.fencedqKeys)
	if err != nil {
		return nil, err
	}
	e.progress("  fencedq: %.0f bytes per retained job (excluding %.0f payload bytes)", r.Fencedq.BytesPerJob, r.Fencedq.PayloadBytes)
	withOp := func(i int) []jobs.Option { return []jobs.Option{jobs.OperationID(fmt.Sprintf("bench-op-%d", i))} }
	r.FencedqOperationID, err = measure(fencedqDrain, fencedqCopies*payload, withOp, e.fencedqKeys)
	if err != nil {
		return nil, err
	}
	e.progress("  fencedq with OperationID: %.0f bytes per retained job", r.FencedqOperationID.BytesPerJob)
	r.AsynqRetained, err = measure(asynqDrain, payload, nil, e.asynqKeys)
	if err != nil {
		return nil, err
	}
	e.progress("  asynq with Retention: %.0f bytes per retained job (excluding %.0f payload bytes)", r.AsynqRetained.BytesPerJob, r.AsynqRetained.PayloadBytes)
	r.Ratio = ratio(r.Fencedq.BytesPerJob, r.AsynqRetained.BytesPerJob)
	r.MeetsTarget = r.Ratio <= r.Target
	r.RatioOperationID = ratio(r.FencedqOperationID.BytesPerJob, r.AsynqRetained.BytesPerJob)
	return r, nil
}

// memSample is how many jobs MEMORY USAGE looks at.
const memSample = 50

func (e *bench) memUsage(ctx context.Context, key string) float64 {
	n, err := e.single.rdb.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		return 0
	}
	return float64(n)
}

// fieldBytes returns the name + value bytes of each field of hash key.
func (e *bench) fieldBytes(ctx context.Context, key string) map[string]int {
	h, err := e.single.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return nil
	}
	out := make(map[string]int, len(h))
	for k, v := range h {
		out[k] = len(k) + len(v)
	}
	return out
}

func (e *bench) fencedqKeys(ctx context.Context, d *drained) (map[string]float64, map[string]int, error) {
	l := ledger.New(e.single.rdb, ledger.Config{Namespace: d.ns})
	out := map[string]float64{}
	k := min(memSample, len(d.jobs))
	for _, res := range d.jobs[:k] {
		job := l.JobKey(res.Queue, res.JobID)
		out["job_hash"] += e.memUsage(ctx, job) / float64(k)
		out["history_list"] += e.memUsage(ctx, job+":history") / float64(k)
		// jobs without one, and jobs their operation id names, write no operation key
		if res.OperationID != res.JobID && ledger.OpJobID(res.Queue, res.OperationID) != res.JobID {
			out["operation_id"] += e.memUsage(ctx, fmt.Sprintf("%s:{%s}:op:%s", d.ns, res.Queue, res.OperationID)) / float64(k)
		}
	}
	for _, q := range d.queues {
		out["succeeded_index"] += e.memUsage(ctx, l.StateKey(q, jobs.Succeeded)) / float64(len(d.jobs))
	}
	for key, v := range out {
		out[key] = round(v, 1)
	}
	res := d.jobs[0]
	return out, e.fieldBytes(ctx, l.JobKey(res.Queue, res.JobID)), nil
}

func (e *bench) asynqKeys(ctx context.Context, d *drained) (map[string]float64, map[string]int, error) {
	out := map[string]float64{}
	k := min(memSample, len(d.tasks))
	for _, ti := range d.tasks[:k] {
		out["task_hash"] += e.memUsage(ctx, fmt.Sprintf("asynq:{%s}:t:%s", ti.Queue, ti.ID)) / float64(k)
	}
	for _, q := range d.queues {
		out["completed_index"] += e.memUsage(ctx, fmt.Sprintf("asynq:{%s}:completed", q)) / float64(len(d.tasks))
	}
	for key, v := range out {
		out[key] = round(v, 1)
	}
	ti := d.tasks[0]
	return out, e.fieldBytes(ctx, fmt.Sprintf("asynq:{%s}:t:%s", ti.Queue, ti.ID)), nil
}
