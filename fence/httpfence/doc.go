// Package httpfence carries fences over HTTP.
//
// # Client
//
// A fenced request carries four headers:
//
//	Fencing-Token:    1717171717000123   (decimal lease token)
//	Fencing-Resource: account:42
//	Fencing-Owner:    worker-7/att-3
//	Idempotency-Key:  job-81f3/debit     (the operation id)
//
// [SetHeaders] sets them on one request. [Transport] sets them on every
// request whose context carries a fence (fence.NewContext, which worker
// pools do for each attempt), so a handler only has to pass its context:
//
//	client := &http.Client{Transport: &httpfence.Transport{}}
//	req, _ := http.NewRequestWithContext(ctx, "POST", url, body)
//	resp, err := client.Do(req)
//	if err == nil {
//		err = httpfence.CheckResponse(resp) // *fence.StaleError, *fence.AlreadyAppliedError, ...
//	}
//
// CheckResponse reports an answer as already applied only when it names
// the request's own operation id: an answer about another operation (a
// proxy that rewrote the Idempotency-Key, a cached answer) returns
// ErrAnswerMismatch, never fence.ErrAlreadyApplied.
//
// Both refuse, with an error matching fence.ErrInvalid, a fence whose
// resource, owner or operation id would not arrive unchanged: one with a
// control character, or with a leading or trailing space (servers strip
// those, so "op " would reach the service as the operation "op").
//
// # Server
//
// [Middleware] is for services that are themselves protected storage. It
// needs a [Guard]; *pgfence.Store and *redisfence.Store both are one. It
// answers requests without fencing headers with 428 (unless
// Options.AllowUnfenced), malformed ones with 400 (a token whose time part
// lies more than a year ahead too: no lease mints it, and as the resource's
// mark it would refuse every later holder for good; fence.Fence.Validate
// refuses it, so pgfence and redisfence do too), stale tokens with 409
// and a JSON body {"error":"stale_token",...}, and repeated operation ids
// with 200, the header Fencing-Already-Applied: true and a JSON body
// {"status":"already_applied",...}, without running the handler again (the
// original response is not replayed). A guard reporting another
// operation's record as the request's gets 500 fence_refused instead,
// logged, so the answer always names the request's operation id.
//
// The operation id is recorded only if the handler answers with a status
// below 400, so a failed request can be retried. With the PostgreSQL guard
// the handler runs inside the fencing transaction and should write through
// pgfence.TxFromContext(r.Context()): the fence, the record and the writes
// commit together. With the Redis guard the fence is checked and the
// operation held as pending before the handler runs and recorded after;
// see redisfence.Store.Guard for what that cannot cover.
//
// The middleware trusts the headers: it cannot tell a lease holder from a
// client that copies or invents a fence. A made-up token within the bound
// above costs the next holder one refused attempt (pools raise their
// counter above the mark that refused it); admit only your workers, behind
// authentication of your own.
package httpfence
