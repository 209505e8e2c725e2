package bank

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/lease"
)

// The bank service's routes (see NewService):
//
//	POST /accounts        {"accounts": [...], "initial": cents}    create missing accounts (204)
//	GET  /accounts        {"acct-000": cents, ...}                 every balance
//	POST /transfers       Transfer as JSON, fencing headers         fenced by httpfence.Middleware:
//	                                                                201 applied, 409 stale_token,
//	                                                                200 + Fencing-Already-Applied,
//	                                                                422 insufficient_funds, 400 invalid
//	POST /fences          fencing headers                           fence on acquire (204, 409 stale_token)
//	GET  /effects/{op}    effect record as JSON, without its owner   200, or 404 never applied
const (
	routeAccounts  = "/accounts"
	routeTransfers = "/transfers"
	routeFences    = "/fences"
	routeEffects   = "/effects/"
)

// effectBody is the JSON answer of GET /effects/{op}. Tokens are decimal
// strings: JSON numbers lose precision above 2^53. It has no owner: any
// caller may ask, and the token with its owner authorises writes as the
// holder (as in the middleware's 409 answer).
type effectBody struct {
	OperationID string `json:"operation_id"`
	Resource    string `json:"resource"`
	Token       string `json:"token"`
}

type setupBody struct {
	Accounts []string `json:"accounts"`
	Initial  int64    `json:"initial"`
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message,omitempty"`
}

// NewService returns the bank as an HTTP service that is itself protected
// storage: POST /transfers runs under httpfence.Middleware(guard), so a
// request with a stale fencing token is answered 409 without touching the
// accounts, and a repeated Idempotency-Key is answered "already applied"
// without moving money again.
//
// Use backend's own fence store as the guard, NewService(pg, pg.Fences()):
// the fence check, the effect record and the debit and credit then commit
// in one PostgreSQL transaction (pgfence.TxFromContext). With another guard
// (a *redisfence.Store, say) the transfer commits in its own transaction
// after the guard accepted the fence, with the check-then-record trade-offs
// that guard documents.
//
// GET /effects/{op} answers from the guard's effect log when it has one
// (pgfence and redisfence stores do), else from backend's; POST /fences
// raises the guard's high-water mark when it can (FenceRaiser), else
// answers 501.
func NewService(backend *PostgresStore, guard httpfence.Guard) http.Handler {
	svc := &service{backend: backend, effects: backend}
	if el, ok := guard.(fence.EffectLog); ok {
		svc.effects = el
	}
	svc.raiser, _ = guard.(FenceRaiser)
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+routeAccounts, svc.setup)
	mux.HandleFunc("GET "+routeAccounts, svc.balances)
	mux.Handle("POST "+routeTransfers, httpfence.Middleware(guard, httpfence.Options{})(http.HandlerFunc(svc.transfer)))
	mux.HandleFunc("POST "+routeFences, svc.fenceOnAcquire)
	mux.HandleFunc("GET "+routeEffects+"{op}", svc.applied)
	return mux
}

type service struct {
	backend *PostgresStore
	effects fence.EffectLog
	raiser  FenceRaiser
}

func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (s *service) setup(w http.ResponseWriter, r *http.Request) {
	var b setupBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&b); err != nil {
		reply(w, http.StatusBadRequest, errorBody{Error: "invalid_request", Message: err.Error()})
		return
	}
	if err := s.backend.Setup(r.Context(), b.Accounts, b.Initial); err != nil {
		reply(w, http.StatusInternalServerError, errorBody{Error: "storage_failed", Message: err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *service) balances(w http.ResponseWriter, r *http.Request) {
	b, err := s.backend.Balances(r.Context())
	if err != nil {
		reply(w, http.StatusInternalServerError, errorBody{Error: "storage_failed", Message: err.Error()})
		return
	}
	reply(w, http.StatusOK, b)
}

// transfer runs after the middleware accepted the fence; with pgfence's
// guard it writes in the fencing transaction.
func (s *service) transfer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var t Transfer
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&t); err != nil {
		reply(w, http.StatusBadRequest, errorBody{Error: "invalid_transfer", Message: err.Error()})
		return
	}
	if err := t.Validate(); err != nil {
		reply(w, http.StatusBadRequest, errorBody{Error: "invalid_transfer", Message: err.Error()})
		return
	}
	if f, _ := fence.FromContext(ctx); f.Resource != t.Resource() {
		reply(w, http.StatusBadRequest, errorBody{Error: "invalid_transfer",
			Message: fmt.Sprintf("fence resource %q is not the source account %q", f.Resource, t.Resource())})
		return
	}
	var err error
	if tx, ok := pgfence.TxFromContext(ctx); ok {
		err = s.backend.transferTx(ctx, tx, t)
	} else {
		err = pgx.BeginFunc(ctx, s.backend.pool, func(tx pgx.Tx) error { return s.backend.transferTx(ctx, tx, t) })
	}
	switch {
	case err == nil:
		reply(w, http.StatusCreated, map[string]string{"status": "applied"})
	case errors.Is(err, ErrInsufficientFunds):
		reply(w, http.StatusUnprocessableEntity, errorBody{Error: "insufficient_funds", Message: err.Error()})
	case errors.Is(err, fence.ErrInvalid):
		reply(w, http.StatusBadRequest, errorBody{Error: "invalid_transfer", Message: err.Error()})
	default:
		reply(w, http.StatusInternalServerError, errorBody{Error: "storage_failed", Message: err.Error()})
	}
}

func (s *service) fenceOnAcquire(w http.ResponseWriter, r *http.Request) {
	f, ok, err := httpfence.FromRequest(r)
	switch {
	case !ok || errors.Is(err, httpfence.ErrMissing):
		reply(w, http.StatusPreconditionRequired, httpfence.ErrorBody{Error: "fence_required", Message: "send the fencing headers"})
		return
	case err != nil:
		reply(w, http.StatusBadRequest, httpfence.ErrorBody{Error: "invalid_fence", Message: err.Error()})
		return
	case s.raiser == nil:
		reply(w, http.StatusNotImplemented, errorBody{Error: "not_supported", Message: "the guard cannot fence on acquire"})
		return
	}
	err = s.raiser.FenceOnAcquire(r.Context(), f)
	var stale *fence.StaleError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.As(err, &stale):
		// The middleware's 409 body, so httpfence.CheckResponse reads it.
		// No owner: with the token it would let any client write as the holder.
		reply(w, http.StatusConflict, httpfence.ErrorBody{Error: "stale_token", Message: stale.Error(),
			Resource: f.Resource, OperationID: f.OperationID, Token: f.Token.String(),
			StoredToken: stale.StoredToken.String()})
	case errors.Is(err, fence.ErrInvalid):
		reply(w, http.StatusBadRequest, httpfence.ErrorBody{Error: "invalid_fence", Message: err.Error()})
	default:
		reply(w, http.StatusServiceUnavailable, httpfence.ErrorBody{Error: "fence_unavailable", Message: err.Error()})
	}
}

func (s *service) applied(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	rec, ok, err := s.effects.Applied(r.Context(), op)
	switch {
	case errors.Is(err, fence.ErrInvalid):
		reply(w, http.StatusBadRequest, errorBody{Error: "invalid_request", Message: err.Error()})
	case err != nil:
		reply(w, http.StatusServiceUnavailable, errorBody{Error: "storage_failed", Message: err.Error()})
	case !ok:
		reply(w, http.StatusNotFound, errorBody{Error: "not_applied"})
	default:
		reply(w, http.StatusOK, effectBody{OperationID: rec.OperationID, Resource: rec.Resource, Token: rec.Token.String()})
	}
}

// HTTPStore is a Store that reaches a bank service (NewService) over HTTP.
// Each transfer carries its fence in the httpfence headers; the service's
// answers map back to the Store contract: 409 stale_token is a
// *fence.StaleError, an already-applied answer a *fence.AlreadyAppliedError,
// 422 ErrInsufficientFunds, 400 fence.ErrInvalid. Any other failure (a
// network error, a 5xx) leaves the outcome unknown; Applied asks the
// service's effect log, whose records name no owner.
type HTTPStore struct {
	base   string
	client *http.Client
}

var (
	_ Store       = (*HTTPStore)(nil)
	_ FenceRaiser = (*HTTPStore)(nil)
)

// NewHTTPStore returns a store for the service at baseURL (no trailing
// path), sending requests with a copy of client (http.DefaultClient when
// nil) whose transport is wrapped in an httpfence.Transport: a fence goes
// to the service's host only, never to another host a redirect names.
func NewHTTPStore(baseURL string, client *http.Client) *HTTPStore {
	if client == nil {
		client = http.DefaultClient
	}
	c := *client
	c.Transport = &httpfence.Transport{Base: client.Transport}
	return &HTTPStore{base: strings.TrimRight(baseURL, "/"), client: &c}
}

func (s *HTTPStore) do(ctx context.Context, method, path string, body any, f *fence.Fence) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if f != nil {
		// Checked here for a plain fence.ErrInvalid; the Transport sets
		// the headers from the request's context, on its host only.
		if err := httpfence.SetHeaders(req, *f); err != nil {
			return nil, err
		}
		req = req.WithContext(fence.NewContext(ctx, *f))
	}
	return s.client.Do(req)
}

// unexpected describes an answer the contract has no error for.
func unexpected(what string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("bank: %s: service answered %s: %s", what, resp.Status, strings.TrimSpace(string(b)))
}

// Setup creates missing accounts through the service.
func (s *HTTPStore) Setup(ctx context.Context, accounts []string, initial int64) error {
	resp, err := s.do(ctx, http.MethodPost, routeAccounts, setupBody{Accounts: accounts, Initial: initial}, nil)
	if err != nil {
		return fmt.Errorf("bank: setup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return unexpected("setup", resp)
	}
	return nil
}

// Transfer posts t with f's fencing headers.
func (s *HTTPStore) Transfer(ctx context.Context, f fence.Fence, t Transfer) error {
	resp, err := s.do(ctx, http.MethodPost, routeTransfers, t, &f)
	if err != nil {
		if errors.Is(err, fence.ErrInvalid) {
			return err
		}
		return fmt.Errorf("bank: transfer %q: %w", f.OperationID, err)
	}
	defer resp.Body.Close()
	if err := httpfence.CheckResponse(resp); err != nil {
		return err
	}
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusUnprocessableEntity:
		return fmt.Errorf("%w: %s", ErrInsufficientFunds, unexpected("transfer", resp))
	case resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusPreconditionRequired:
		return fmt.Errorf("%w: %s", fence.ErrInvalid, unexpected("transfer", resp))
	}
	return unexpected("transfer", resp)
}

// FenceOnAcquire raises the source account's high-water mark through the
// service.
func (s *HTTPStore) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	if f.OperationID == "" {
		f.OperationID = "-" // not recorded; the headers need one
	}
	resp, err := s.do(ctx, http.MethodPost, routeFences, nil, &f)
	if err != nil {
		if errors.Is(err, fence.ErrInvalid) {
			return err
		}
		return fmt.Errorf("bank: fence %q: %w", f.Resource, err)
	}
	defer resp.Body.Close()
	if err := httpfence.CheckResponse(resp); err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return unexpected("fence on acquire", resp)
	}
	return nil
}

// Applied asks the service's effect log. The record has no Owner: the
// service does not give it out.
func (s *HTTPStore) Applied(ctx context.Context, op string) (fence.Effect, bool, error) {
	if op == "" {
		return fence.Effect{}, false, fmt.Errorf("%w: empty operation id", fence.ErrInvalid)
	}
	resp, err := s.do(ctx, http.MethodGet, routeEffects+url.PathEscape(op), nil, nil)
	if err != nil {
		return fence.Effect{}, false, fmt.Errorf("bank: applied %q: %w", op, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
		return fence.Effect{}, false, nil
	case http.StatusOK:
	default:
		return fence.Effect{}, false, unexpected("applied", resp)
	}
	var b effectBody
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		return fence.Effect{}, false, fmt.Errorf("bank: applied %q: %w", op, err)
	}
	tok, err := lease.ParseToken(b.Token)
	if err != nil {
		return fence.Effect{}, false, fmt.Errorf("bank: applied %q: token: %w", op, err)
	}
	return fence.Effect{OperationID: b.OperationID, Resource: b.Resource, Token: tok}, true, nil
}

// Balances reads every balance through the service.
func (s *HTTPStore) Balances(ctx context.Context) (map[string]int64, error) {
	resp, err := s.do(ctx, http.MethodGet, routeAccounts, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("bank: balances: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, unexpected("balances", resp)
	}
	out := map[string]int64{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("bank: balances: %w", err)
	}
	return out, nil
}
