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
//	                        cancelled), whether it is paused (by whom, why),
//	                        throughput, fenced rejections, deduplications;
//	                        the reconciler's live leader (from its leader
//	                        lease, jobs.LeaderResource) and last scan (from
//	                        jobs.Ledger.ReconcilerStatus)
//	#/stuck                 running jobs past or near their lease deadline
//	#/attention             uncertain and review jobs with their evidence
//	                        (reason, error, history) and resolve actions
//	#/events/deduplicated   deduplicated enqueues and finished jobs found due
//	                        again, linked to the original job
//	                        (#/events/fenced: fenced writes;
//	                        #/events/operator: cancellations, pauses and
//	                        resumptions with who and why)
//	#/jobs/<queue>/<state>  jobs in one state
//	#/job/<queue>/<id>      one job: attempts (token, resource fence token,
//	                        owner, times, outcome, error), a pending cancel
//	                        request, history (including cancel entries with
//	                        actor and note), redacted args, resolve actions
//	                        (a dead or cancelled job can be re-run)
//	#/search/<text>         a job by job id or operation id
//
// Every URL the pages use is relative, so the handler works under any path
// prefix:
//
//	mux.Handle("/ops/", http.StripPrefix("/ops", h))
//
// # JSON API
//
//	GET  api/overview                  queues, counts, paused queues, counters, throughput, reconciler
//	GET  api/jobs?state=&queue=&offset=&limit=&history=1
//	GET  api/jobs/{queue}/{id}         job, attempts, history, allowed decisions
//	GET  api/search?q=                 match by job id or operation id
//	GET  api/events?queue=&type=&limit=  events, newest first; type deduplicated, fenced or operator
//	GET  api/stuck?margin_ms=          running jobs whose lease deadline is due
//	GET  api/session                   whether actions are enabled and who is signed in
//	GET  api/csrf                      a CSRF token (also set as a cookie)
//	GET  api/login                     asks the browser for basic-auth credentials
//	POST api/jobs/{queue}/{id}/resolve {"decision": "succeeded|rerun|dead", "note": "..."}
//
// The dashboard reads everything through jobs.Ledger methods and knows no
// Redis key of its own. Pausing, resuming and cancelling are done with the
// fencedq command or jobs.Client (Pause, Resume, Cancel); the dashboard
// shows their results.
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
// holding markup is shown as text.
//
// Operator actions are logged (Options.Logger) with the queue, job id,
// decision and actor, never with args.
package dashboard
