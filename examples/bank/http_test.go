package bank_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

func fz(x bank.Transfer, tok lease.Token, owner, op string) fence.Fence {
	return fence.Fence{Resource: x.Resource(), Token: tok, Owner: owner, OperationID: op}
}

// TestHTTPStoreContract checks that the bank service and HTTPStore keep
// the Store contract over HTTP: fenced, exactly once, and nothing written
// on any rejection.
func TestHTTPStoreContract(t *testing.T) {
	e := newBankEnv(t, "http")
	s := e.store.(*bank.HTTPStore)
	ctx := context.Background()
	x := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 100}
	before := e.balances()

	if err := s.Transfer(ctx, fz(x, 10, "w-10", "op/1 a"), x); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := s.Applied(ctx, "op/1 a") // escaped in the path
	if err != nil || !ok || rec.Token != 10 || rec.Owner != "" || rec.Resource != x.Resource() {
		t.Fatalf("Applied = %+v, %v, %v", rec, ok, err)
	}
	e.wantOneTransfer(before, x)
	before = e.balances()

	var already *fence.AlreadyAppliedError
	if err := s.Transfer(ctx, fz(x, 11, "w-11", "op/1 a"), x); !errors.As(err, &already) || already.Record.Token != 10 {
		t.Fatalf("same operation again: %v, want already applied with token 10", err)
	}
	var stale *fence.StaleError
	if err := s.Transfer(ctx, fz(x, 9, "w-9", "op-2"), x); !errors.As(err, &stale) || stale.StoredToken != 10 {
		t.Fatalf("lower token: %v, want stale against 10", err)
	}
	if err := s.FenceOnAcquire(ctx, fz(x, 20, "w-20", "")); err != nil {
		t.Fatal(err)
	}
	if err := s.FenceOnAcquire(ctx, fz(x, 15, "w-15", "")); !errors.As(err, &stale) || stale.StoredToken != 20 {
		t.Fatalf("fence on acquire below the mark: %v", err)
	}
	if err := s.Transfer(ctx, fz(x, 15, "w-15", "op-3"), x); !errors.As(err, &stale) || stale.StoredToken != 20 {
		t.Fatalf("older holder after fence on acquire: %v", err)
	}
	big := bank.Transfer{From: "acct-000", To: "acct-001", Cents: 1 << 40}
	if err := s.Transfer(ctx, fz(big, 20, "w-20", "op-4"), big); !errors.Is(err, bank.ErrInsufficientFunds) {
		t.Fatalf("overdraft: %v", err)
	}
	nowhere := bank.Transfer{From: "acct-000", To: "nobody", Cents: 1}
	if err := s.Transfer(ctx, fz(nowhere, 20, "w-20", "op-5"), nowhere); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("unknown account: %v", err)
	}
	if err := s.Transfer(ctx, fence.Fence{Resource: "account:acct-003", Token: 30, Owner: "w", OperationID: "op-6"}, x); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("fence on another resource: %v", err)
	}
	if err := s.Transfer(ctx, fz(x, 0, "w", "op-7"), x); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("zero token: %v", err)
	}
	for _, op := range []string{"op-2", "op-3", "op-4", "op-5", "op-6", "op-7"} {
		if _, ok, err := s.Applied(ctx, op); ok || err != nil {
			t.Fatalf("rejected %s recorded: %v, %v", op, ok, err)
		}
	}
	if after := e.balances(); after[x.From] != before[x.From] || after[x.To] != before[x.To] || bank.Total(after) != bank.Total(before) {
		t.Fatalf("rejected transfers moved money: %v -> %v", before, after)
	}
	// Unfenced writes are refused by the middleware.
	resp, err := http.Post(e.serviceURL+"/transfers", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPreconditionRequired {
		t.Fatalf("unfenced transfer: %s", resp.Status)
	}
	if err := s.Transfer(ctx, fz(x, 20, "w-20", "op-8"), x); err != nil {
		t.Fatalf("the current holder: %v", err)
	}
}

// TestServiceWithRedisGuard runs the service with a guard that is not the
// backend's own fence store: the guard fences and records, PostgreSQL
// holds the money, and the effect log is the guard's.
func TestServiceWithRedisGuard(t *testing.T) {
	e := newBankEnv(t, "postgres")
	rdb, ns := redistest.New(t)
	guard, err := redisfence.New(rdb, redisfence.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	var _ httpfence.Guard = guard
	srv := httptest.NewServer(bank.NewService(e.pg, guard))
	t.Cleanup(srv.Close)
	s := bank.NewHTTPStore(srv.URL, nil)
	ctx := context.Background()
	x := bank.Transfer{From: "acct-002", To: "acct-000", Cents: 5}
	before := e.balances()
	if err := s.FenceOnAcquire(ctx, fz(x, 7, "w-7", "")); err != nil {
		t.Fatal(err)
	}
	var stale *fence.StaleError
	if err := s.Transfer(ctx, fz(x, 6, "w-6", "op-1"), x); !errors.As(err, &stale) || stale.StoredToken != 7 {
		t.Fatalf("stale: %v", err)
	}
	if err := s.Transfer(ctx, fz(x, 7, "w-7", "op-1"), x); err != nil {
		t.Fatal(err)
	}
	if err := s.Transfer(ctx, fz(x, 7, "w-7", "op-1"), x); !errors.Is(err, fence.ErrAlreadyApplied) {
		t.Fatalf("again: %v", err)
	}
	e.wantOneTransfer(before, x)
	if rec, ok, err := s.Applied(ctx, "op-1"); err != nil || !ok || rec.Token != 7 {
		t.Fatalf("Applied (the guard's log) = %+v, %v, %v", rec, ok, err)
	}
	if _, ok, _ := e.pg.Applied(ctx, "op-1"); ok {
		t.Fatal("the PostgreSQL effect log was used although the guard is Redis")
	}
}
