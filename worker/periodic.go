package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker/internal/maintenance"
)

// DefaultMissedAfter is how late a tick may be enqueued under CatchUpNone
// when MissedAfter is not given.
const DefaultMissedAfter = time.Minute

// DefaultMaxCatchUp is how many missed ticks a schedule under CatchUpAll
// or CatchUpNone enqueues after a downtime when MaxCatchUp is not given.
const DefaultMaxCatchUp = maintenance.DefaultMaxCatchUp

// MaxMaxCatchUp is the largest value MaxCatchUp accepts.
const MaxMaxCatchUp = maintenance.MaxMaxCatchUp

// MinInterval is the shortest interval Every accepts.
const MinInterval = time.Second

// ErrSchedule means a periodic job's schedule or options are invalid.
var ErrSchedule = errors.New("worker: invalid periodic job")

// Schedule says when a periodic job's ticks fall. Next must be
// deterministic: every leader must compute the same ticks. The ledger keeps
// ticks in whole milliseconds: a tick between two (Every(time.Hour/7)) is
// taken at the next millisecond, and ticks less than a millisecond apart
// are one tick.
type Schedule interface {
	// Next returns the first tick strictly after t (zero: no more ticks).
	// A tick not after t fails the schedule's pass (logged and counted like
	// a panic) rather than repeating one tick.
	Next(t time.Time) time.Time
	// String describes the schedule (recorded in the ledger).
	String() string
}

// CatchUp is a periodic job's policy for ticks missed during downtime.
type CatchUp string

// Catch-up policies; see PeriodicJob.
const (
	CatchUpLatest CatchUp = maintenance.CatchUpLatest
	CatchUpAll    CatchUp = maintenance.CatchUpAll
	CatchUpNone   CatchUp = maintenance.CatchUpNone
)

// Cron returns a schedule from a cron expression: five fields (minute,
// hour, day of month, month, day of week), or six with a leading seconds
// field, or a descriptor (@yearly, @monthly, @weekly, @daily, @hourly,
// @every <duration>), as parsed by github.com/robfig/cron/v3. The
// expression is read in the zone InTimeZone gives (default UTC), unless it
// starts with CRON_TZ=<zone>. "@every d" is Every(d), and takes no zone. An invalid expression,
// or one no date matches ("0 0 30 2 *"), is reported by Pool.AddPeriodic.
//
// Across daylight-saving changes a fixed time of day (none of the seconds,
// minutes and hours fields a lone "*": "30 2 * * *") ticks once, as cron
// runs it: a time the clocks skip ticks at the change, a time they repeat
// ticks at its first occurrence only. A step counts as a list of fixed
// times: "0 */2 * * *" is 00:00, 02:00, ... 22:00, each ticking once
// across a change like "30 2 * * *". Wildcard hours or minutes ("0 * * *
// *", "*/15 * * * *", whose hours field is "*") follow the real clock: one
// tick per hour that passed.
func Cron(expr string) Schedule {
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		zone, rest, _ := strings.Cut(expr, " ")
		_, name, _ := strings.Cut(zone, "=")
		rest = strings.TrimSpace(rest)
		switch {
		case name == "":
			// The cron parser would read it as UTC, recorded as zone "".
			return &cronSchedule{expr: expr, err: errors.New("the zone prefix names no zone")}
		case rest == "":
			// The cron parser panics on it.
			return &cronSchedule{expr: expr, err: errors.New("a zone prefix with no schedule after it (\"CRON_TZ=Europe/Paris 0 9 * * *\")")}
		case strings.HasPrefix(rest, "@every"):
			// The cron parser would tick it from each pass's cursor, not at
			// Every's multiples, and below MinInterval unchecked.
			return &cronSchedule{expr: expr, err: errors.New("@every takes no time zone: it ticks at the multiples of its interval in UTC; drop the zone")}
		}
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		iv, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return &cronSchedule{expr: expr, err: err}
		}
		return Every(iv)
	}
	s, err := cronParser.Parse(expr)
	return &cronSchedule{expr: expr, sched: s, err: err}
}

var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

type cronSchedule struct {
	expr  string
	sched cron.Schedule
	err   error
}

// Next returns the first tick strictly after t (zero for an invalid
// expression). A fixed time of day ticks once a day across daylight-saving
// changes, as cron runs it (see dstNext).
func (c *cronSchedule) Next(t time.Time) time.Time {
	if c.sched == nil {
		return time.Time{}
	}
	if s, ok := c.sched.(*cron.SpecSchedule); ok {
		return dstNext(s, t)
	}
	return c.sched.Next(t)
}

func (c *cronSchedule) String() string { return c.expr }

// inZone reads the expression in loc unless it names its own zone, and
// returns the zone used. A cron schedule is never read in the process's
// local zone, which may differ between pools.
func (c *cronSchedule) inZone(loc *time.Location) string {
	if strings.HasPrefix(c.expr, "TZ=") || strings.HasPrefix(c.expr, "CRON_TZ=") {
		zone, _, _ := strings.Cut(c.expr, " ")
		_, name, _ := strings.Cut(zone, "=")
		return name
	}
	if s, ok := c.sched.(*cron.SpecSchedule); ok {
		s.Location = loc
	}
	return loc.String()
}

// Every returns a schedule ticking every d (at least MinInterval), at the
// multiples of d counted from the zero time.Time (UTC): Every(time.Hour)
// ticks on the hour, Every(24*time.Hour) at midnight UTC. For times of day
// in a zone, use Cron.
func Every(d time.Duration) Schedule { return every(d) }

type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.UTC().Truncate(d).Add(d)
}
func (e every) String() string { return "@every " + time.Duration(e).String() }

// PeriodicJob is a job enqueued on a schedule; create it with Periodic and
// register it with Pool.AddPeriodic.
//
// # Periodic jobs
//
// A periodic job enqueues the same args on a schedule: a cron expression
// or a fixed interval. Register it on a pool before Run:
//
//	err := pool.AddPeriodic(
//		worker.Periodic(worker.Cron("0 9 * * MON-FRI"), ReportArgs{Team: "ops"},
//			worker.ScheduleID("ops-report"),
//			worker.InTimeZone(paris),
//			worker.EnqueueOptions(jobs.Queue("reports"), jobs.MaxRetries(3))),
//		worker.Periodic(worker.Every(15*time.Minute), SyncArgs{}, worker.WithCatchUp(worker.CatchUpAll)),
//	)
//
// The maintenance leader (one pool of the namespace at a time) enqueues
// the ticks; register the same schedules on every pool that may lead. Each
// tick is enqueued with the operation id "periodic:<schedule id>:<tick
// time in UTC, RFC 3339>" (jobs.PeriodicOperationID), and an enqueue of a
// known operation id returns the existing job: a tick enqueued twice, by
// two leaders around a handover or by a retry after a timeout, is one job.
// Ticks are computed by the namespace's time (Redis's clock, continued
// across a failover: jobs.Inspector.ServerTime) from the schedule's
// cursor, which the ledger keeps, so every leader computes the same ticks. The leader's
// schedule records are fenced by its lease token: a deposed leader that
// wakes up cannot move a schedule's record.
//
// A tick is due once its time has passed; the leader looks every
// Maintenance.Interval (default 1s), so a tick is enqueued within about
// that interval. After downtime (no leader for a while: every pool down,
// Redis unreachable), the schedule's catch-up policy decides what happens
// to the ticks that were missed:
//
//   - CatchUpLatest (default): only the newest missed tick is enqueued;
//     the others are counted as skipped.
//   - CatchUpAll: every missed tick is enqueued, oldest first, in batches
//     of 100, up to MaxCatchUp (default DefaultMaxCatchUp) ticks: the
//     newest ones; older ones are skipped, with a warning naming the
//     schedule and how many.
//   - CatchUpNone: a tick later than MissedAfter (default
//     DefaultMissedAfter) is skipped; only ticks that are still on time
//     are enqueued (again at most MaxCatchUp, the newest).
//
// A leader handover takes up to the leader lease's TTL; a tick due during
// it is late, not missed, unless it is later than MissedAfter under
// CatchUpNone. A schedule's first tick is the first one after it was first
// registered: a new schedule does not catch up on its past.
//
// The ledger records every schedule (jobs.Inspector.Schedules, Schedule,
// ScheduleTicks): its definition, cursor, last tick and the job it
// produced, next tick, and counts of ticks enqueued and skipped. A handler
// learns its tick with jobs.ParsePeriodicOperationID(job.OperationID).
//
// Changing a schedule's expression, zone, args or queue without a
// ScheduleID gives it a new default id, hence a new schedule that starts
// afresh; the old record stays until removed (jobs.Client.RemoveSchedule).
// Set ScheduleID to keep a schedule's history across changes. A new
// expression or zone under a ScheduleID runs from the leader's pass that
// records it: its ticks from before the last pass under the old one are
// not caught up.
//
// Pools may define one schedule id differently (a rolling deploy): the
// definition of the most recently started pool is recorded, and a leader
// whose pool defines it otherwise ticks by the recorded definition when
// its job is the same (kind, args, enqueue options), else skips it; it
// logs one warning, and jobs.Schedule.Conflict shows it. Once no live pool
// defines the recorded definition any more (the newer pools stopped), the
// leader records its own and the conflict ends.
type PeriodicJob struct {
	schedule    Schedule
	args        jobs.JobArgs
	id          string
	idSet       bool // ScheduleID was given (an empty id is refused, not the default)
	loc         *time.Location
	catchUp     CatchUp
	missedAfter time.Duration
	maxCatchUp  int
	// maxCatchUpSet: MaxCatchUp was given (a zero is refused, not the
	// default).
	maxCatchUpSet bool
	opts          []jobs.Option
	nilOption     int // 1 + the index of the first nil PeriodicOption (0: none)
}

// PeriodicOption configures a PeriodicJob.
type PeriodicOption func(*PeriodicJob)

// ScheduleID names the schedule (1-100 letters, digits or ._-); its ticks'
// operation ids and its ledger record derive from it. Default: the kind
// and a hash of the schedule, zone, queue and args, so changing any of
// them (an arg value included) starts a new schedule and orphans the old
// record: give an explicit id to a schedule whose args may change. An
// empty id is refused (ErrSchedule), not taken for the default: leave the
// option out for that.
func ScheduleID(id string) PeriodicOption {
	return func(p *PeriodicJob) { p.id, p.idSet = id, true }
}

// InTimeZone reads a cron expression in loc (default UTC). time.Local is
// refused by Pool.AddPeriodic (as is CRON_TZ=Local): it is each machine's
// own zone, and every pool that may lead must compute the same ticks. So
// is a zone its name does not load (a time.FixedZone): the ledger records
// the name, and pools reading the schedule back load the zone by it.
func InTimeZone(loc *time.Location) PeriodicOption { return func(p *PeriodicJob) { p.loc = loc } }

// WithCatchUp sets the policy for ticks missed during downtime (default
// CatchUpLatest).
func WithCatchUp(c CatchUp) PeriodicOption { return func(p *PeriodicJob) { p.catchUp = c } }

// MissedAfter sets how late a tick may be enqueued under CatchUpNone
// (default DefaultMissedAfter). The leader finds a tick up to
// Maintenance.Interval after it is due: Pool.AddPeriodic refuses a
// shorter MissedAfter under CatchUpNone (ErrSchedule).
func MissedAfter(d time.Duration) PeriodicOption { return func(p *PeriodicJob) { p.missedAfter = d } }

// MaxCatchUp bounds how many missed ticks the schedule enqueues after a
// downtime under CatchUpAll or CatchUpNone (1 to MaxMaxCatchUp, default
// DefaultMaxCatchUp): the newest n, oldest first; the older ones are
// skipped (counted in the schedule's skipped ticks and logged with its
// id). A schedule every second whose leader was down for a week enqueues n
// jobs, not 604 800. Pool.AddPeriodic refuses a value out of range
// (ErrSchedule).
func MaxCatchUp(n int) PeriodicOption {
	return func(p *PeriodicJob) { p.maxCatchUp = n; p.maxCatchUpSet = true }
}

// EnqueueOptions are applied to every tick's job (queue, retries,
// timeout). OperationID, RunAt and Delay are rejected: the tick sets its
// own operation id and is due at once.
func EnqueueOptions(opts ...jobs.Option) PeriodicOption {
	return func(p *PeriodicJob) { p.opts = append(p.opts, opts...) }
}

// Periodic returns a job that enqueues args at every tick of schedule. A
// nil option makes AddPeriodic refuse the job (ErrSchedule).
func Periodic(schedule Schedule, args jobs.JobArgs, opts ...PeriodicOption) *PeriodicJob {
	p := &PeriodicJob{schedule: schedule, args: args, loc: time.UTC, catchUp: CatchUpLatest, missedAfter: DefaultMissedAfter}
	for i, o := range opts {
		if o == nil {
			if p.nilOption == 0 {
				p.nilOption = i + 1
			}
			continue
		}
		o(p)
	}
	return p
}

// AddPeriodic registers periodic jobs on p; the maintenance leader
// enqueues their ticks (a pool with Maintenance.Disabled or
// Maintenance.PeriodicDisabled never does). It fails with ErrRunning once
// the pool runs, ErrConfig for a nil pool, and with an error matching
// ErrSchedule (or jobs.ErrInvalid, for the args and enqueue options) when
// a job is invalid or its schedule id is already registered; nothing is
// registered then. A job of a kind p has no worker for is registered all
// the same (another pool may run its ticks): Run logs a warning naming its
// schedule and kind.
func (p *Pool) AddPeriodic(pjs ...*PeriodicJob) error {
	if p.unmade() {
		return errNilPool
	}
	specs := make([]maintenance.Periodic, 0, len(pjs))
	for _, pj := range pjs {
		spec, err := pj.compile()
		if err != nil {
			return err
		}
		if spec.Spec.CatchUp == string(CatchUpNone) && spec.MissedAfter < p.cfg.Maintenance.Interval {
			// A tick is found up to an interval after it is due.
			return fmt.Errorf("%w: schedule %q: missed-after %v is below the maintenance interval %v: most ticks would be skipped as late",
				ErrSchedule, spec.Spec.ID, spec.MissedAfter, p.cfg.Maintenance.Interval)
		}
		specs = append(specs, spec)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return ErrRunning
	}
	seen := map[string]bool{}
	for _, s := range p.periodic {
		seen[s.Spec.ID] = true
	}
	for _, s := range specs {
		if seen[s.Spec.ID] {
			return fmt.Errorf("%w: schedule id %q registered twice", ErrSchedule, s.Spec.ID)
		}
		seen[s.Spec.ID] = true
	}
	p.periodic = append(p.periodic, specs...)
	return nil
}

// compile validates pj and returns what the periodic service runs.
func (pj *PeriodicJob) compile() (maintenance.Periodic, error) {
	if pj == nil || pj.schedule == nil {
		return maintenance.Periodic{}, fmt.Errorf("%w: no schedule", ErrSchedule)
	}
	if pj.nilOption > 0 {
		return maintenance.Periodic{}, fmt.Errorf("%w: option %d is nil", ErrSchedule, pj.nilOption-1)
	}
	if pj.loc == nil {
		return maintenance.Periodic{}, fmt.Errorf("%w: nil time zone", ErrSchedule)
	}
	sched, zone, err := compileSchedule(pj.schedule, pj.loc)
	if err != nil {
		return maintenance.Periodic{}, err
	}
	pj.schedule = sched
	switch pj.catchUp {
	case CatchUpLatest, CatchUpAll, CatchUpNone:
	default:
		return maintenance.Periodic{}, fmt.Errorf("%w: catch-up policy %q", ErrSchedule, pj.catchUp)
	}
	if pj.missedAfter <= 0 {
		return maintenance.Periodic{}, fmt.Errorf("%w: missed-after %v must be positive", ErrSchedule, pj.missedAfter)
	}
	maxCatchUp := DefaultMaxCatchUp
	if pj.maxCatchUpSet {
		if pj.maxCatchUp < 1 || pj.maxCatchUp > MaxMaxCatchUp {
			return maintenance.Periodic{}, fmt.Errorf("%w: max catch-up %d out of range 1 to %d", ErrSchedule, pj.maxCatchUp, MaxMaxCatchUp)
		}
		maxCatchUp = pj.maxCatchUp
	}
	prep, err := jobs.Prepare(pj.args, pj.opts...)
	if err != nil {
		return maintenance.Periodic{}, fmt.Errorf("worker: periodic job: %w", err)
	}
	if prep.OperationID != "" || !prep.RunAt.IsZero() {
		return maintenance.Periodic{}, fmt.Errorf("%w: OperationID, RunAt and Delay are set by each tick", ErrSchedule)
	}
	id := pj.id
	if !pj.idSet {
		id = defaultScheduleID(prep, pj.schedule.String(), zone)
	}
	if err := jobs.ValidateScheduleID(id); err != nil {
		return maintenance.Periodic{}, fmt.Errorf("%w: %w", ErrSchedule, err)
	}
	spec := jobs.ScheduleSpec{ID: id, Schedule: pj.schedule.String(), TimeZone: zone, Kind: prep.Kind,
		Queue: prep.Queue, CatchUp: string(pj.catchUp), MissedAfter: pj.missedAfter, MaxCatchUp: maxCatchUp}
	if err := digestSpec(&spec, prep); err != nil {
		return maintenance.Periodic{}, fmt.Errorf("%w: %v", ErrSchedule, err)
	}
	return maintenance.Periodic{
		Spec:        spec,
		Next:        pj.schedule.Next,
		MissedAfter: pj.missedAfter,
		MaxCatchUp:  maxCatchUp,
		Args:        pj.args,
		Options:     pj.opts,
	}, nil
}

// compileSchedule checks schedule read in loc and returns the schedule to
// run (a cron schedule copied and set to its zone) and the zone recorded.
func compileSchedule(schedule Schedule, loc *time.Location) (Schedule, string, error) {
	switch s := schedule.(type) {
	case *cronSchedule:
		if s.err != nil {
			return nil, "", fmt.Errorf("%w: cron expression %q: %v", ErrSchedule, s.expr, s.err)
		}
		c := *s // the caller's value may be shared with another job in another zone
		if spec, ok := s.sched.(*cron.SpecSchedule); ok {
			cp := *spec
			c.sched = &cp
		}
		zone := c.inZone(loc)
		if zone == time.Local.String() {
			// Each machine's own zone: pools on machines in two zones would
			// tick at different times under one schedule id.
			return nil, "", fmt.Errorf("%w: cron expression %q in the local zone, which may differ between pools: name the zone (time.LoadLocation(\"Europe/Paris\"), or CRON_TZ=Europe/Paris)",
				ErrSchedule, s.expr)
		}
		if err := zoneByName(zone, loc, s.expr); err != nil {
			return nil, "", err
		}
		if c.Next(time.Now()).IsZero() {
			return nil, "", fmt.Errorf("%w: cron expression %q matches no date: it would never tick", ErrSchedule, s.expr)
		}
		return &c, zone, nil
	case every:
		if time.Duration(s) < MinInterval {
			return nil, "", fmt.Errorf("%w: interval %v below %v", ErrSchedule, time.Duration(s), MinInterval)
		}
		return s, "UTC", nil
	}
	return schedule, loc.String(), nil
}

// zoneByName checks that loc, the zone a cron expression without a zone of
// its own is read in, is the zone its name loads: the ledger records the
// name only, so other pools (and the digest comparing definitions) know it
// by that. A time.FixedZone named otherwise ("UTC+1", or an IANA name with
// another offset) would tick at other times on a pool reading it back.
func zoneByName(zone string, loc *time.Location, expr string) error {
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil // loaded by name already
	}
	named, err := time.LoadLocation(zone)
	if err == nil {
		y := time.Now().Year()
		for _, m := range []time.Month{time.January, time.July} { // both sides of daylight saving
			at := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
			_, a := at.In(loc).Zone()
			_, b := at.In(named).Zone()
			if a != b {
				err = errors.New("its offsets differ from those of the zone of that name")
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: cron expression %q in zone %q, which other pools cannot load by its name (%v): use time.LoadLocation with an IANA name",
			ErrSchedule, expr, zone, err)
	}
	return nil
}

// recordedSchedule builds the ticks of a schedule expression recorded in
// zone by another pool, as Cron and InTimeZone would.
func recordedSchedule(expr, zone string) (func(time.Time) time.Time, error) {
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("%w: zone %q: %v", ErrSchedule, zone, err)
	}
	s, _, err := compileSchedule(Cron(expr), loc)
	if err != nil {
		return nil, err
	}
	return s.Next, nil
}

// digestSpec sets spec's JobDigest, a digest of the job each tick enqueues,
// and its Digest, a digest of the whole definition: pools that define the
// schedule alike compute the same. The ledger keeps only digests of the
// args, never the args.
func digestSpec(spec *jobs.ScheduleSpec, prep *jobs.Prepared) error {
	job := *prep
	job.Display = nil // derived from Payload
	b, err := json.Marshal(job)
	if err != nil {
		return err
	}
	spec.JobDigest = digest(string(b))
	parts := []string{spec.Schedule, spec.TimeZone, spec.CatchUp, spec.MissedAfter.String(), spec.JobDigest}
	if spec.MaxCatchUp != DefaultMaxCatchUp {
		// Only when set otherwise, so a definition without it keeps the
		// digest pools computed before the bound existed.
		parts = append(parts, "max_catch_up="+strconv.Itoa(spec.MaxCatchUp))
	}
	spec.Digest = digest(parts...)
	return nil
}

// digest is a hex prefix of the SHA-256 of parts, each ended by a NUL.
func digest(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// defaultScheduleID is the kind (its characters outside the id alphabet
// replaced) and a hash of what defines the schedule, so every pool that
// registers the same periodic job derives the same id.
func defaultScheduleID(prep *jobs.Prepared, schedule, zone string) string {
	kind := []byte(prep.Kind)
	for i, c := range kind {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			kind[i] = '_'
		}
	}
	if len(kind) > 80 {
		kind = kind[:80]
	}
	return string(kind) + "-" + digest(schedule, zone, prep.Queue, string(prep.Payload))[:12]
}
