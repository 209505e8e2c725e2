package bank

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
)

// RedisStore keeps accounts in Redis through redisfence. A fenced write
// touches one hash slot (the source account's), so a transfer debits the
// source's balance and records the credit in the source's "sent" hash; an
// account's balance is its own balance plus everything sent to it. The
// Redis store does not refuse overdrafts (the script cannot see credits
// held in other slots); PostgresStore does.
type RedisStore struct {
	rdb   redis.UniversalClient
	fence *redisfence.Store
	ns    string
}

// NewRedisStore returns a store under namespace ns.
func NewRedisStore(rdb redis.UniversalClient, ns string) (*RedisStore, error) {
	fs, err := redisfence.New(rdb, redisfence.Config{Namespace: ns})
	if err != nil {
		return nil, err
	}
	return &RedisStore{rdb: rdb, fence: fs, ns: ns}, nil
}

func (s *RedisStore) accountsKey() string { return s.ns + ":bank:accounts" }

func (s *RedisStore) balanceKey(a string) string { return s.fence.DataKey("account:"+a, "balance") }

func (s *RedisStore) sentKey(a string) string { return s.fence.DataKey("account:"+a, "sent") }

// Setup creates missing accounts.
func (s *RedisStore) Setup(ctx context.Context, accounts []string, initial int64) error {
	for _, a := range accounts {
		if err := s.rdb.HSetNX(ctx, s.balanceKey(a), "cents", initial).Err(); err != nil {
			return fmt.Errorf("bank: setup: %w", err)
		}
		if err := s.rdb.SAdd(ctx, s.accountsKey(), a).Err(); err != nil {
			return fmt.Errorf("bank: setup: %w", err)
		}
	}
	return nil
}

// Transfer applies the debit and the recorded credit in one fenced script.
// Both accounts must exist: they are read first, outside the script (the
// accounts set is in another hash slot), which is sound because no account
// is ever removed.
func (s *RedisStore) Transfer(ctx context.Context, f fence.Fence, t Transfer) error {
	if f.Resource != t.Resource() {
		return fmt.Errorf("%w: fence resource %q is not the source account", fence.ErrInvalid, f.Resource)
	}
	known, err := s.rdb.SMIsMember(ctx, s.accountsKey(), t.From, t.To).Result()
	if err != nil {
		return fmt.Errorf("bank: accounts: %w", err)
	}
	var found []string
	for i, a := range []string{t.From, t.To} {
		if known[i] {
			found = append(found, a)
		}
	}
	if err := knownAccounts(t, found); err != nil {
		return err
	}
	return s.fence.Apply(ctx, f,
		redisfence.HIncrBy(s.balanceKey(t.From), "cents", -t.Cents),
		redisfence.HIncrBy(s.sentKey(t.From), t.To, t.Cents))
}

// FenceOnAcquire raises the source account's high-water mark.
func (s *RedisStore) FenceOnAcquire(ctx context.Context, f fence.Fence) error {
	return s.fence.FenceOnAcquire(ctx, f)
}

// Applied asks the effect log.
func (s *RedisStore) Applied(ctx context.Context, op string) (fence.Effect, bool, error) {
	return s.fence.Applied(ctx, op)
}

// Balances sums each account's own balance and the credits sent to it.
func (s *RedisStore) Balances(ctx context.Context) (map[string]int64, error) {
	accounts, err := s.rdb.SMembers(ctx, s.accountsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("bank: balances: %w", err)
	}
	out := map[string]int64{}
	for _, a := range accounts {
		v, err := s.rdb.HGet(ctx, s.balanceKey(a), "cents").Int64()
		if err != nil {
			return nil, fmt.Errorf("bank: balance %s: %w", a, err)
		}
		out[a] += v
		sent, err := s.rdb.HGetAll(ctx, s.sentKey(a)).Result()
		if err != nil {
			return nil, fmt.Errorf("bank: sent %s: %w", a, err)
		}
		for to, c := range sent {
			n, _ := strconv.ParseInt(c, 10, 64)
			out[to] += n
		}
	}
	return out, nil
}
