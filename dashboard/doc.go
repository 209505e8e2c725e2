// Package dashboard serves fencedq's operator dashboard: an http.Handler
// with a few pages and the JSON API they use, read straight from the Redis
// ledger (package jobs).
//
// # Pages
//
// The pages are one document (index.html with app.js and style.css, all
// embedded, no CDN and no build step) that routes on the URL fragment:
//
//	#/                      overview: per queue, jobs per state (pending,
//	                        running, uncertain, review, succeeded, dead,
//	                        cancelled), whether it is paused (by whom, why)
//	                        with Pause and Resume buttons, throughput, fenced
//	                        rejections, deduplications, the last hour's
//	                        charts; the live maintenance leader (from its
//	                        leader lease, jobs.Inspector.Leader) and its last
//	                        scan (from jobs.Inspector.LeaderStatus)
//	#/jobs?state=&queue=&kind=&from=&to=&sort=&offset=
//	                        jobs filtered by state, queue (or partition:
//	                        the form offers both, and keeps a queue no job
//	                        uses any more when filtered on), kind and a time
//	                        range (in UTC to the second, as every time
//	                        shown) on the state's index (pending: due time;
//	                        running: lease deadline; uncertain: next look;
//	                        others: when the state was entered), oldest or
//	                        newest first, 50 a page (the pager's labels
//	                        follow the order shown; a page past the last
//	                        job says so and links to the last page that
//	                        holds jobs); args as a preview; a
//	                        bulk action (cancel waiting, pending or running jobs,
//	                        re-run dead, cancelled, review or uncertain
//	                        ones) over every job that passes the filters,
//	                        after a confirmation that says how many
//	#/job/<queue>/<id>      one job: run time, an "overdue" marker (a lease
//	                        deadline passed or near, or a due job nobody
//	                        started), the lease deadline counting down,
//	                        attempts (token, resource fence token,
//	                        times, outcome, error), a pending cancel request,
//	                        history (including cancel entries with actor and
//	                        note), redacted args, a Cancel button and the
//	                        resolve actions (a dead or cancelled job can be
//	                        re-run)
//	#/history?window=1h|24h&queue=
//	                        charts of succeeded, failed attempts, fenced
//	                        rejections, deduplications, jobs that became
//	                        uncertain and jobs sent to review over the last
//	                        hour or day (exact per-minute counts kept by the
//	                        scripts; refreshed live)
//	#/pools                 every live pool (id, host, pid, queues,
//	                        concurrency, busy slots, version, start, last
//	                        heartbeat, Redis's clock minus the pool's,
//	                        flagged beyond jobs.ClockOffsetWarn or after a
//	                        jump back) and which one is the maintenance leader
//	#/schedules             periodic schedules: kind, queue, cron or interval
//	                        and zone, catch-up policy, last tick and the job
//	                        it produced (with its state), next tick, ticks
//	                        enqueued and skipped, and when a leader last
//	                        registered it (one no pool registers any more
//	                        stops being refreshed and is marked); schedules
//	                        live pools define differently: the recorded
//	                        definition's pool, the other pool, since when
//	#/schedules/<id>        one schedule and its newest 50 ticks: tick time,
//	                        the job (state, or "gone" past its retention),
//	                        operation id, leader token, and whether the tick
//	                        was deduplicated into an existing job
//	#/workflows             the newest workflows: state, progress n/m, started
//	#/workflows/<id>        one workflow's steps drawn by depth, each with its
//	                        state, token and redacted output, linked to its
//	                        job, an arrow along each dependency
//	#/limits                concurrency limits with parked jobs or at their
//	                        limit once a job parked, rate limits with
//	                        deferred jobs, fair groups with
//	                        pending jobs (with the next one; each naming its
//	                        queue: a partition's, on a partitioned queue);
//	                        jobs by their whole ids
//	#/stuck                 running jobs past or near their lease deadline,
//	                        by Redis's clock, which the page names, with this
//	                        dashboard's and the pools' offsets from it (a
//	                        warning when one is beyond jobs.ClockOffsetWarn)
//	#/attention             uncertain and review jobs with their evidence
//	                        (reason, error, history) and resolve actions
//	#/events/deduplicated   deduplicated enqueues (an operation id known, a
//	                        unique key held) and finished jobs found due
//	                        again, each with its cause, linked to the
//	                        original job
//	                        (#/events/fenced: fenced writes;
//	                        #/events/operator: cancellations, pauses and
//	                        resumptions with who and why)
//	#/search/<text>         jobs by job id or operation id, or whose job id
//	                        or operation id starts with the text
//
// A page that refreshes itself (the overview, stuck jobs, pools, limits,
// schedules, workflows, history) shows an error while the ledger cannot be
// read (Redis down or failing over) and keeps trying every few seconds, so
// it comes back by itself once Redis answers. So does every other page
// whose read failed that way (an answer of 503 or none, said "trying
// again"); one refused for what it asked (a job that does not exist) is
// not asked again.
//
// Ages ("… ago") and countdowns are measured on the namespace's time, as
// every time shown is: against the server_time of the latest answer, not
// the browser's clock.
//
// Above every page, a banner lists the ledger rewinds detected in the last
// day (jobs.Inspector.Rewinds): Redis came back with older data after a
// failover or restart, and acknowledged writes were lost. It also names
// each live pool whose last check found fewer Redis replicas connected
// than its Durability.Replicas requires (published in its heartbeat):
// that pool's durable claims, completions and enqueues fail meanwhile.
//
// The charts are SVG built by app.js from per-minute buckets that the
// maintenance leader records in Redis (a day per
// queue, at most 1440 small entries), so they show on first load and
// survive restarts; nothing is added to the claim, renew or commit paths.
//
// Every URL the pages use is relative, so the handler works under any path
// prefix:
//
//	mux.Handle("/ops/", http.StripPrefix("/ops", h))
//
// # JSON API
//
//	GET  api/overview                  queues, counts, paused queues, counters, throughput, maintenance (the leader)
//	GET  api/jobs?state=&queue=&kind=&from=&to=&sort=asc|desc&offset=&limit=&history=1&select=1
//	                                   filtered jobs (limit at most 200; offset at most
//	                                   100000, max_offset, a larger one is refused with 400;
//	                                   args_preview and args_size, not args); select=1 adds the selection
//	                                   (at most 1000 job references) for a bulk action;
//	                                   server_time (as in every view that shows times:
//	                                   the namespace's time, absent when unreadable)
//	GET  api/jobs/{queue}/{id}         job (whole redacted args), attempts, history, allowed
//	                                   decisions, cancellable, server_time, overdue, queue_paused
//	GET  api/search?q=&prefix=0        match by job id or operation id, then by prefix
//	                                   (prefix, history and select take 1 or true, 0 or
//	                                   false; another value is refused with 400)
//	GET  api/events?queue=&type=&limit=  events, newest first; type deduplicated, fenced or operator
//	GET  api/stuck?margin_ms=&queue=&limit=  running jobs whose lease deadline is due or within
//	                                   margin_ms (0 to 3600000), those due first (limit 100, at most 500; more: true when more
//	                                   are due than listed, which the page says), and clock: the
//	                                   dashboard's and the pools' offsets from Redis, a warning
//	GET  api/pools                     live pools (each with its clock measurement), the
//	                                   maintenance leader marked
//	GET  api/rewinds                   ledger rewinds detected in the last 24 hours, pools missing replicas
//	GET  api/series?window=1h|24h&queue=  chart points: the exact counts per step (kept per
//	                                   minute by the scripts, the current minute included),
//	                                   the leader's state snapshots, and the state counts now
//	GET  api/schedules?id=&ticks=      periodic schedules (at most 500; total counts all),
//	                                   each with its newest ticks (default 5, 0 to 100
//	                                   with id, to 5 without)
//	                                   and the state of the job each produced
//	GET  api/workflows?id=&limit=&offset=
//	                                   the newest workflows (limit at most 100, default 50)
//	                                   from offset (at most 10000) and their total, or
//	                                   workflow id (at most 200 bytes) with its
//	                                   steps (needs a client: 503 without one); server_time
//	                                   as api/jobs
//	GET  api/limits                    per queue: limits, rates and fair groups in use
//	GET  api/session                   whether actions are enabled and who is signed in
//	GET  api/csrf                      a CSRF token (also set as a cookie)
//	GET  api/login                     asks the browser for basic-auth credentials
//	POST api/jobs/{queue}/{id}/resolve {"decision": "succeeded|rerun|dead", "note": "...", "state": "...", "token": "...", "runs": 0}
//	                                   (state, token and runs, optional: what the page showed; the
//	                                   decision then applies only while the job is still in
//	                                   that state with that token and run count, else 409: it
//	                                   moved on; runs counts re-runs, so a job cancelled and
//	                                   re-run since, never claimed, is refused too)
//	POST api/jobs/{queue}/{id}/cancel  {"note": "...", "state": "...", "token": "...", "runs": 0} (note required)
//	POST api/jobs/{queue}/{id}/run-now {"note": "...", "state": "...", "token": "...", "runs": 0} (note optional):
//	                                   a scheduled pending job due at once (queue_paused: who
//	                                   paused its queue, when it waits for a resume)
//	                                   (state, token and runs of both, optional: as for resolve)
//	POST api/queues/{queue}/pause      {"note": "..."} (required)
//	POST api/queues/{queue}/resume     {"note": "...", "pause_id": "..."} (pause_id, optional: the
//	                                   pause the page showed, its "id"; a queue paused again
//	                                   since by another pause stays paused, 409)
//	                                   (both answer the queue, whether the call changed it, the
//	                                   pause it is under now, or "unread": true when the action
//	                                   applied but that could not be read back, and "known":
//	                                   false when no job or pool had used the queue, most likely
//	                                   a mistyped name: the action is done all the same, so a
//	                                   queue can be paused before its first job, and the queue
//	                                   is listed from then on)
//	POST api/bulk                      {"action": "cancel|rerun|run_now", "jobs": [{"queue","id"}], "note": "...", "state": "..."}
//	                                   (at most 1000 jobs, each listed once; answers done and,
//	                                   per job, why not; state, optional: the state the jobs
//	                                   were selected in, which the action then applies to only;
//	                                   once the action's time, Options.Timeout, runs out, the
//	                                   jobs left are not tried and are listed "not attempted")
//
// An action's body is application/json holding exactly one object of the
// fields shown: an unknown field, a field given twice in any object (keys
// compared as encoding/json matches them, without regard to case), a
// second value ({...}{"action":"rerun"})
// or any data after the object but white space is refused with 400
// (code "invalid") and nothing is done. An API request's query with a
// parameter Go's parser drops (a bad %-escape, a ';' separator) or one
// given twice is refused with 400 (code "invalid") too, never read as
// absent or as one of its values. An endpoint asked with a method it
// does not serve answers 405 (code "method_not_allowed") with Allow; an
// API path with an empty, "." or ".." segment, and "api" without its
// slash, answer 404 (code "not_found"), never a redirect. Notes
// and the operator's name follow jobs.Client's rules (no control
// characters; a note may hold line feeds and tabs).
//
// An action that failed at the ledger (Redis down, a timeout, a reply
// lost) answers 503 (code "unavailable"; in a bulk answer, per job) saying
// it may have been done: Redis may have run it before its reply was lost,
// so look at the job or queue before acting again (an action that names
// what the page showed is refused then if it was done). The pages say the
// same of an action whose answer never came from the dashboard (no answer
// at all, or a proxy's 502 or 504 page).
//
// The dashboard reads only through jobs.Inspector (List for filtered
// lists, Search for ids and prefixes, which scans within a budget and says
// when it stopped early).
// Every action goes through jobs.Client (Cancel, Resolve, RunNow, Pause, Resume),
// which records the operator (operator:<user>) and the note in the job's
// history or the queue's event feed.
//
// Job records are shown in their redacted form (jobs.Record.Args); the raw
// payload is never read into a response. JSON responses escape <, > and &.
//
// # Security
//
// The dashboard is read-only unless Options sets credentials: a username
// and password (HTTP basic auth, for people) and/or a bearer token (for
// scripts). Without credentials every action answers 403; with them, an
// action without valid credentials answers 401. Reads are open unless
// Options.ProtectReads is set; put the handler behind your own access
// control, and serve it over TLS when credentials are configured.
//
// Actions are protected against cross-site request forgery twice:
// http.CrossOriginProtection rejects cross-origin browser requests
// (Sec-Fetch-Site, Origin), and a signed double-submit token is required
// from browsers: GET api/csrf sets an HttpOnly, SameSite=Strict cookie and
// returns the same token, which the POST must carry in the X-CSRF-Token
// header. Requests authenticated with the bearer token, which browsers
// never attach on their own, are exempt from the token (not from the
// origin check). Credentials and tokens are compared in constant time.
//
// Every response carries a Content-Security-Policy without inline scripts
// or styles (default-src 'self'; frame-ancestors 'none'; ...),
// X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer. The
// pages build their DOM with textContent only, so a payload or error text
// holding markup is shown as text; format characters (bidirectional
// formatting and invisible ones: zero-width space and joiners, byte order
// mark, tag characters), line separators and control characters other
// than line feed and tab are shown as \u escapes (\u202e, \u200b;
// \U000e0041 above U+FFFF), as the fencedq command prints them.
// A value with no place to break a line (a 200-byte id, an 8 KiB error
// text) breaks anywhere, so none pushes a page wider than the window.
// Where fields are listed as key=value pairs (a history entry's details,
// a job's headers), a value holding white space, "=", "," or a quote is
// quoted as JSON, so an error text cannot read as more fields.
// The JSON API writes those characters (above U+001F) as \u escapes too,
// for scripts reading it in a terminal: the values decode the same.
//
// Operator actions are logged (Options.Logger) with the queue, job id,
// action or decision and actor, never with args; a bulk action logs one
// line with its counts. Rejected credentials (on an action, a protected
// read, api/login or api/session) are logged with the path and the remote
// address, never the credentials.
package dashboard
