package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

// init turns the test binary into a periodic-scheduler process when
// FENCEDQ_PERIODIC_HELPER names its worker id (see startPeriodicHelper).
func init() {
	if id := os.Getenv("FENCEDQ_PERIODIC_HELPER"); id != "" {
		os.Exit(runPeriodicHelper(id))
	}
}

type tickArgs struct {
	Report string `json:"report"`
}

func (tickArgs) Kind() string { return "tick" }

// periodicTicks is the schedule both helper processes register: a tick
// every second, every missed tick caught up, on a queue no pool consumes.
func periodicTicks() *worker.PeriodicJob {
	return worker.Periodic(worker.Every(time.Second), tickArgs{Report: "r"}, worker.ScheduleID("every-second"),
		worker.WithCatchUp(worker.CatchUpAll), worker.EnqueueOptions(jobs.Queue("ticks")))
}

func runPeriodicHelper(id string) int {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("FENCEDQ_REDIS")})
	p, err := worker.NewPool(rdb, worker.Config{
		Jobs: jobs.Config{Namespace: os.Getenv("FENCEDQ_NS")}, WorkerID: id, LeaseTTL: time.Second,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Maintenance: worker.MaintenanceConfig{Interval: 100 * time.Millisecond},
	})
	if err == nil {
		err = p.AddPeriodic(periodicTicks())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	_ = p.Run(ctx)
	return 0
}

func startPeriodicHelper(t *testing.T, id, addr, ns string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FENCEDQ_PERIODIC_HELPER="+id, "FENCEDQ_REDIS="+addr, "FENCEDQ_NS="+ns)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	return cmd
}

// TestPeriodicTicksExactlyOnceAcrossLeaderHandover runs the scheduler in
// two processes. The first leads and enqueues ticks; it is SIGSTOPped
// across several ticks, the second takes over when its lease lapses, and
// the first is resumed (a deposed leader waking up mid-pass). Every tick
// from the first one recorded to the last one must have exactly one job.
func TestPeriodicTicksExactlyOnceAcrossLeaderHandover(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	ledger := ledger.New(rdb, ledger.Config{Namespace: ns})
	ctx := context.Background()

	sched := func() *jobs.Schedule {
		s, err := ledger.Schedule(ctx, "every-second")
		if err != nil && !errors.Is(err, jobs.ErrNotFound) {
			t.Fatal(err)
		}
		return s
	}
	leader := func() string {
		st, err := ledger.LeaderStatus(ctx)
		if err != nil || st == nil {
			return ""
		}
		return st.Leader
	}

	// The waits below span helper processes starting (test binaries under
	// the race detector), one-second ticks and a leader lease lapsing:
	// longer than the default bound on a loaded machine.
	a := startPeriodicHelper(t, "sched-a", srv.Addr, ns)
	redistest.AwaitWithin(t, rdb, ns, "sched-a leading, two ticks enqueued", 30*time.Second, func() bool {
		s := sched()
		return leader() == "sched-a" && s != nil && s.Enqueued >= 2
	})
	b := startPeriodicHelper(t, "sched-b", srv.Addr, ns)

	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := sched().LastTick
	redistest.AwaitWithin(t, rdb, ns, "sched-b leading, three seconds of ticks", 30*time.Second, func() bool {
		s := sched()
		return leader() == "sched-b" && s.LastTick.Sub(stoppedAt) >= 3*time.Second
	})
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := sched().LastTick
	redistest.AwaitWithin(t, rdb, ns, "two seconds of ticks after sched-a woke", 30*time.Second, func() bool {
		return sched().LastTick.Sub(resumedAt) >= 2*time.Second
	})
	for _, c := range []*exec.Cmd{a, b} {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range []*exec.Cmd{a, b} {
		_, _ = c.Process.Wait()
	}

	s := sched()
	// The first tick: the oldest tick whose job exists. Every second from
	// there to the last recorded tick must have exactly one job, and the
	// queue must hold nothing else.
	ids, err := ledger.IDs(ctx, "ticks", jobs.Pending, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ledger.GetMany(ctx, "ticks", jobs.Pending, ids)
	if err != nil {
		t.Fatal(err)
	}
	byTick := map[time.Time]int{}
	var first time.Time
	for _, r := range recs {
		id, tick, ok := jobs.ParsePeriodicOperationID(r.OperationID)
		if !ok || id != "every-second" {
			t.Fatalf("job %s has operation id %q", r.ID, r.OperationID)
		}
		byTick[tick.UTC()]++
		if first.IsZero() || tick.Before(first) {
			first = tick.UTC()
		}
	}
	want := 0
	for tk := first; !tk.After(s.LastTick.UTC()); tk = tk.Add(time.Second) {
		want++
		if n := byTick[tk]; n != 1 {
			t.Errorf("tick %s: %d jobs, want 1", tk.Format(time.RFC3339), n)
		}
	}
	if len(recs) != want {
		t.Errorf("%d jobs for %d ticks from %s to %s", len(recs), want, first.Format(time.RFC3339), s.LastTick.UTC().Format(time.RFC3339))
	}
	if want < 7 {
		t.Errorf("only %d ticks in the window", want)
	}
	if s.Enqueued < int64(want) {
		t.Errorf("schedule records %d ticks enqueued, %d ticks have jobs", s.Enqueued, want)
	}
	ticks, err := ledger.ScheduleTicks(ctx, "every-second", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range ticks {
		r, err := ledger.FindByOperation(ctx, tk.OperationID("every-second"))
		if err != nil || r.ID != tk.JobID {
			t.Errorf("tick %s recorded job %s; its operation id finds %v (%v)", tk.Time, tk.JobID, r, err)
		}
	}
	t.Logf("%d ticks from %s to %s, each one job; %d tick records (%d deduplicated by a second enqueue)",
		want, first.Format(time.RFC3339), s.LastTick.UTC().Format(time.RFC3339), s.Enqueued, s.Enqueued-int64(want))
}

// TestPeriodicRecordAndRun: a pool runs its schedule's ticks; the ledger
// shows the schedule, its last tick, the job it produced, and the next.
func TestPeriodicRecordAndRun(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	ran := make(chan string, 16)
	_ = worker.Register(p, jobs.WorkFunc[tickArgs](func(ctx context.Context, j *jobs.Job[tickArgs]) error {
		ran <- j.OperationID
		return nil
	}))
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Second), tickArgs{Report: "daily"})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	var op string
	select {
	case op = <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("no tick ran within 20s")
	}
	id, tick, ok := jobs.ParsePeriodicOperationID(op)
	if !ok {
		t.Fatalf("operation id %q is not a tick's", op)
	}
	// The leader records a tick right after enqueueing it; the job may run first.
	var scheds []*jobs.Schedule
	redistest.Await(t, e.rdb, e.ns, "the tick recorded in its schedule", func() bool {
		scheds, _ = e.ledger.Schedules(context.Background())
		return len(scheds) == 1 && !scheds[0].LastTick.Before(tick)
	})
	s := scheds[0]
	if s.ID != id || s.Kind != "tick" || s.Queue != "default" || s.Schedule != "@every 1s" || s.CatchUp != "latest" || s.TimeZone != "UTC" {
		t.Fatalf("schedule %+v", s)
	}
	if s.LastTick.Before(tick) || s.LastJob == "" || !s.NextTick.After(s.LastTick) {
		t.Fatalf("schedule %+v after tick %s", s, tick)
	}
}

// TestPeriodicDisabled: a leading pool with Maintenance.PeriodicDisabled
// registers no schedule and enqueues no tick, while its other services go
// on (its status is published pass after pass).
func TestPeriodicDisabled(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.PeriodicDisabled = true
	p := e.pool(cfg)
	_ = worker.Register(p, jobs.WorkFunc[tickArgs](func(context.Context, *jobs.Job[tickArgs]) error { return nil }))
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Second), tickArgs{Report: "daily"})); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e.start(p)
	// Two status passes: the periodic service, had it run, would have made
	// its first pass (at once, beside the first status pass) by the second.
	var first time.Time
	redistest.Await(t, e.rdb, e.ns, "two status passes of the leader", func() bool {
		st, _ := e.ledger.LeaderStatus(ctx)
		if st == nil || st.Leader != p.ID() {
			return false
		}
		if first.IsZero() {
			first = st.LastScan
		}
		return st.LastScan.After(first)
	})
	if scheds, err := e.ledger.Schedules(ctx); err != nil || len(scheds) != 0 {
		t.Fatalf("schedules %v (%v): the leader ran its periodic jobs", scheds, err)
	}
	if n, _ := e.ledger.Counts(ctx, jobs.DefaultQueue); n[jobs.Pending]+n[jobs.Succeeded] != 0 {
		t.Fatalf("ticks were enqueued: %v", n)
	}
	if !strings.Contains(e.logs.String(), "periodic jobs disabled") {
		t.Fatal("the pool did not log that its periodic jobs are disabled")
	}
}

func TestAddPeriodicRejects(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	for name, pj := range map[string]*worker.PeriodicJob{
		"bad cron": worker.Periodic(worker.Cron("61 * * * *"), tickArgs{}),
		// no date matches: it would never tick
		"february 30": worker.Periodic(worker.Cron("0 0 30 2 *"), tickArgs{}),
		"april 31":    worker.Periodic(worker.Cron("CRON_TZ=Europe/Paris 0 9 31 4 *"), tickArgs{}),
		"bad every":   worker.Periodic(worker.Cron("@every soon"), tickArgs{}),
		"short every": worker.Periodic(worker.Every(time.Millisecond), tickArgs{}),
		// a zone would make the cron parser tick @every from the cursor,
		// unaligned and unchecked against MinInterval
		// the ledger records a zone's name: other pools load it by name
		"fixed zone":              worker.Periodic(worker.Cron("0 9 * * *"), tickArgs{}, worker.InTimeZone(time.FixedZone("UTC+1", 3600))),
		"fixed zone, IANA name":   worker.Periodic(worker.Cron("0 9 * * *"), tickArgs{}, worker.InTimeZone(time.FixedZone("Europe/Paris", 3600))),
		"fixed zone without name": worker.Periodic(worker.Cron("0 9 * * *"), tickArgs{}, worker.InTimeZone(time.FixedZone("", 3600))),
		"zoned every":             worker.Periodic(worker.Cron("CRON_TZ=Europe/Paris @every 1h"), tickArgs{}),
		"zoned short every":       worker.Periodic(worker.Cron("TZ=UTC @every 10ms"), tickArgs{}),
		"bad id":                  worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.ScheduleID("a:b")),
		// an id read from configuration left empty: taken for the default
		// id, the schedule would fork whenever its args change
		"empty id":      worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.ScheduleID("")),
		"bad catch-up":  worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.WithCatchUp("sometimes")),
		"operation id":  worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.EnqueueOptions(jobs.OperationID("x"))),
		"delay":         worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.EnqueueOptions(jobs.Delay(time.Second))),
		"nil schedule":  worker.Periodic(nil, tickArgs{}),
		"nil time zone": worker.Periodic(worker.Cron("0 9 * * *"), tickArgs{}, worker.InTimeZone(nil)),
		// each machine's own zone: pools on two machines would tick at
		// different times under one schedule id
		"local zone":         worker.Periodic(worker.Cron("0 9 * * *"), tickArgs{}, worker.InTimeZone(time.Local)),
		"CRON_TZ=Local":      worker.Periodic(worker.Cron("CRON_TZ=Local 0 9 * * *"), tickArgs{}),
		"TZ=Local":           worker.Periodic(worker.Cron("TZ=Local 0 9 * * *"), tickArgs{}),
		"local zone, hourly": worker.Periodic(worker.Cron("@hourly"), tickArgs{}, worker.InTimeZone(time.Local)),
	} {
		if err := p.AddPeriodic(pj); !errors.Is(err, worker.ErrSchedule) {
			t.Errorf("%s: %v, want ErrSchedule", name, err)
		}
	}
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.EnqueueOptions(jobs.Queue("no spaces")))); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("bad queue: %v, want jobs.ErrInvalid", err)
	}
	ok := worker.Periodic(worker.Cron("0 9 * * MON-FRI"), tickArgs{}, worker.ScheduleID("weekday"))
	if err := p.AddPeriodic(ok); err != nil {
		t.Fatal(err)
	}
	if err := p.AddPeriodic(worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.ScheduleID("weekday"))); !errors.Is(err, worker.ErrSchedule) {
		t.Errorf("duplicate id: %v", err)
	}
}

func TestCronZones(t *testing.T) {
	at := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC) // a Monday
	for _, c := range []struct {
		s    worker.Schedule
		want time.Time
	}{
		{worker.Cron("0 9 * * MON-FRI"), time.Date(2025, 1, 6, 9, 0, 0, 0, time.UTC)},
		{worker.Cron("CRON_TZ=Europe/Paris 0 9 * * *"), time.Date(2025, 1, 6, 8, 0, 0, 0, time.UTC)},
		{worker.Cron("*/10 * * * * *"), at.Add(10 * time.Second)},
		{worker.Cron("@hourly"), at.Add(time.Hour)},
		{worker.Cron("@every 90s"), at.Add(90 * time.Second)},
		{worker.Every(15 * time.Minute), at.Add(15 * time.Minute)},
	} {
		if got := c.s.Next(at); !got.Equal(c.want) {
			t.Errorf("%s: next after %s is %s, want %s", c.s, at, got, c.want)
		}
	}
}

// panicky is a Schedule whose Next panics: a poison schedule.
type panicky struct{}

func (panicky) Next(time.Time) time.Time { panic("poison schedule") }
func (panicky) String() string           { return "@poison" }

// TestPoisonScheduleDoesNotStopTheOthers: a schedule whose Next panics,
// registered first, fails on its own (logged) while the schedule after it
// keeps ticking.
func TestPoisonScheduleDoesNotStopTheOthers(t *testing.T) {
	e := ticksBehind(t, panicky{}, 1)
	redistest.Await(t, e.rdb, e.ns, "the poison schedule's failure logged", func() bool {
		return strings.Contains(e.logs.String(), "periodic schedule pass failed") && strings.Contains(e.logs.String(), "poison schedule")
	})
}

// ticksBehind runs a pool with schedule bad (id "a-bad"), registered
// first, and a healthy one ticking every second ("b-healthy"), and returns
// once the healthy one ticked n times.
func ticksBehind(t *testing.T, bad worker.Schedule, n int) *env {
	t.Helper()
	e := newEnv(t)
	p := e.pool(e.config())
	ran := make(chan string, 16)
	_ = worker.Register(p, jobs.WorkFunc[tickArgs](func(ctx context.Context, j *jobs.Job[tickArgs]) error {
		ran <- j.OperationID
		return nil
	}))
	if err := p.AddPeriodic(
		worker.Periodic(bad, tickArgs{Report: "bad"}, worker.ScheduleID("a-bad")),
		worker.Periodic(worker.Every(time.Second), tickArgs{Report: "healthy"}, worker.ScheduleID("b-healthy")),
	); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	deadline := time.After(20 * time.Second)
	for healthy := 0; healthy < n; {
		select {
		case op := <-ran:
			id, _, ok := jobs.ParsePeriodicOperationID(op)
			if !ok || id != "b-healthy" {
				t.Fatalf("ran %q, want a tick of b-healthy", op)
			}
			healthy++
		case <-deadline:
			t.Fatalf("the healthy schedule ticked fewer than %d times behind %s; logs:\n%s", n, bad, tail(e.logs.String(), 20))
		}
	}
	return e
}

// rounding is a Schedule whose Next rounds to the second instead of
// truncating: at a whole second it returns t itself, not a tick after it.
type rounding struct{}

func (rounding) Next(t time.Time) time.Time { return t.Round(time.Second) }
func (rounding) String() string             { return "@rounding" }

// TestScheduleThatDoesNotAdvanceFailsAlone: a schedule whose Next returns
// a time not after its argument fails on its own (logged, with what it
// returned) instead of walking the same tick forever, and the schedule
// after it keeps ticking.
func TestScheduleThatDoesNotAdvanceFailsAlone(t *testing.T) {
	e := ticksBehind(t, rounding{}, 2)
	redistest.Await(t, e.rdb, e.ns, "the stuck schedule's failure logged", func() bool {
		return strings.Contains(e.logs.String(), "periodic schedule pass failed") && strings.Contains(e.logs.String(), "not after")
	})
	s, err := e.ledger.Schedule(context.Background(), "a-bad")
	if err != nil {
		t.Fatal(err)
	}
	if s.Skipped > 1 || s.Enqueued > 1 {
		t.Fatalf("the stuck schedule counted %d skipped and %d enqueued ticks", s.Skipped, s.Enqueued)
	}
}

// TestPeriodicDefinitionDigests: pools defining a schedule alike record
// the same digests; another timing changes the definition's digest but not
// the job's, another arg value changes both. A recorded expression is
// rebuilt in its zone, and one that cannot be is refused with ErrSchedule.
func TestPeriodicDefinitionDigests(t *testing.T) {
	spec := func(pj *worker.PeriodicJob) jobs.ScheduleSpec {
		t.Helper()
		s, err := worker.PeriodicSpec(pj)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	hourly := func(arg string) *worker.PeriodicJob {
		return worker.Periodic(worker.Every(time.Hour), tickArgs{Report: arg}, worker.ScheduleID("report"))
	}
	a, b := spec(hourly("r")), spec(hourly("r"))
	if a.Digest == "" || a.JobDigest == "" || a.Digest != b.Digest || a.JobDigest != b.JobDigest {
		t.Fatalf("one definition, two digests: %+v, %+v", a, b)
	}
	faster := spec(worker.Periodic(worker.Every(5*time.Minute), tickArgs{Report: "r"}, worker.ScheduleID("report")))
	if faster.Digest == a.Digest || faster.JobDigest != a.JobDigest {
		t.Fatalf("another interval: %+v, was %+v", faster, a)
	}
	if other := spec(hourly("s")); other.Digest == a.Digest || other.JobDigest == a.JobDigest {
		t.Fatalf("another arg value: %+v, was %+v", other, a)
	}

	next, err := worker.RecordedSchedule(faster.Schedule, faster.TimeZone)
	at := time.Date(2030, 1, 7, 8, 1, 0, 0, time.UTC)
	if err != nil || !next(at).Equal(at.Add(4*time.Minute)) {
		t.Fatalf("recorded %q: %v", faster.Schedule, err)
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	next, err = worker.RecordedSchedule("0 9 * * *", "Europe/Paris")
	if err != nil || !next(at).Equal(time.Date(2030, 1, 8, 9, 0, 0, 0, paris)) {
		t.Fatalf("recorded cron in Paris: %v", err)
	}
	for _, bad := range [][2]string{{"@every 1ms", "UTC"}, {"not cron", "UTC"}, {"0 9 * * *", "Nowhere/Else"}} {
		if _, err := worker.RecordedSchedule(bad[0], bad[1]); !errors.Is(err, worker.ErrSchedule) {
			t.Fatalf("recorded %q in %q: %v, want ErrSchedule", bad[0], bad[1], err)
		}
	}
}

// TestDefaultScheduleIDFollowsArgs: without a ScheduleID, the id hashes the
// args, so another arg value is another schedule (hence the README's
// advice to name schedules whose args change); a named one keeps its id.
func TestDefaultScheduleIDFollowsArgs(t *testing.T) {
	id := func(arg string, opts ...worker.PeriodicOption) string {
		t.Helper()
		s, err := worker.PeriodicSpec(worker.Periodic(worker.Every(time.Hour), tickArgs{Report: arg}, opts...))
		if err != nil {
			t.Fatal(err)
		}
		return s.ID
	}
	if a, b := id("r"), id("r"); a != b || !strings.HasPrefix(a, "tick-") {
		t.Fatalf("one definition, ids %q and %q", a, b)
	}
	if a, b := id("r"), id("s"); a == b {
		t.Fatalf("another arg value kept the default id %q", a)
	}
	if a, b := id("r", worker.ScheduleID("report")), id("s", worker.ScheduleID("report")); a != "report" || b != a {
		t.Fatalf("named schedule: ids %q and %q", a, b)
	}
}

// A zone prefix with no expression after it, or naming no zone, is
// refused like any invalid expression (the cron parser panics on the
// first and reads the second as UTC).
func TestCronZonePrefixAloneRefused(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	for _, expr := range []string{"CRON_TZ=Europe/Paris", "TZ=UTC", "CRON_TZ=", "CRON_TZ= 0 9 * * *", "TZ= @daily"} {
		if err := p.AddPeriodic(worker.Periodic(worker.Cron(expr), tickArgs{})); !errors.Is(err, worker.ErrSchedule) {
			t.Errorf("%q: %v, want ErrSchedule", expr, err)
		}
	}
	if n := worker.Cron("CRON_TZ=Europe/Paris").Next(time.Now()); !n.IsZero() {
		t.Errorf("next tick %v, want none", n)
	}
}

// TestMissedAfterBelowTheMaintenanceInterval: under CatchUpNone a tick is
// found up to Maintenance.Interval after it is due, so a MissedAfter
// shorter than that interval would skip most ticks; it is refused. Other
// policies do not use it.
func TestMissedAfterBelowTheMaintenanceInterval(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Maintenance.Interval = time.Second
	p := e.pool(cfg)
	err := p.AddPeriodic(worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.ScheduleID("late"),
		worker.WithCatchUp(worker.CatchUpNone), worker.MissedAfter(time.Millisecond)))
	if !errors.Is(err, worker.ErrSchedule) || !strings.Contains(err.Error(), "maintenance interval") {
		t.Fatalf("AddPeriodic: %v, want ErrSchedule naming the maintenance interval", err)
	}
	for _, pj := range []*worker.PeriodicJob{
		worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.ScheduleID("late"),
			worker.WithCatchUp(worker.CatchUpNone), worker.MissedAfter(time.Second)),
		worker.Periodic(worker.Every(time.Minute), tickArgs{}, worker.ScheduleID("latest"), worker.MissedAfter(time.Millisecond)),
	} {
		if err := p.AddPeriodic(pj); err != nil {
			t.Fatal(err)
		}
	}
}
