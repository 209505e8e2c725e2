package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/cli"
	"github.com/fencedq/fencedq/jobs"
)

// errUnfenced refuses a decision that a job's last attempt did not apply
// its operation (a re-run or dead of a job in uncertain or review) made
// with no store to fence that attempt out of, and without --unfenced.
var errUnfenced = errors.New("no fence store to cut the last attempt off from")

// fenceFlags name the store the handlers write through (pgfence's or
// redisfence's), which a "not applied" decision first fences the job's
// last attempt out of (jobs.Config.Fencer), or say, with --unfenced, that
// the operator decides without it.
type fenceFlags struct {
	postgres, pgSchema, pgPrefix string
	redis, redisNamespace        string
	unfenced                     bool
}

// unfencedFlag is the flag that records a "not applied" decision without
// fencing the attempt out first.
const unfencedFlag = "unfenced"

func (f *fenceFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.postgres, "fence-postgres", "", "PostgreSQL URL of the pgfence store the handlers write through: a rerun or dead of an uncertain or review job first fences its last attempt out of it (a password may come from PGPASSWORD or ~/.pgpass instead)")
	fs.StringVar(&f.pgSchema, "fence-postgres-schema", "", "with --fence-postgres: the pgfence tables' schema (pgfence.Options.Schema; default: the connection's search_path)")
	fs.StringVar(&f.pgPrefix, "fence-postgres-table-prefix", "", "with --fence-postgres: the pgfence tables' prefix (pgfence.Options.TablePrefix; default "+pgfence.DefaultTablePrefix+", - for none)")
	fs.StringVar(&f.redis, "fence-redis", "", "Redis URL of the redisfence store the handlers write through, as --redis takes it (the same URL when the store shares the ledger's Redis): a rerun or dead of an uncertain or review job first fences its last attempt out of it")
	fs.StringVar(&f.redisNamespace, "fence-redis-namespace", "", "with --fence-redis: the store's namespace (redisfence.Config.Namespace; default: --namespace)")
	fs.BoolVar(&f.unfenced, unfencedFlag, false, "record a rerun or dead of an uncertain or review job without fencing its last attempt out of any store: an attempt still running may apply its operation after the decision")
}

// given reports whether a fence store is named.
func (f *fenceFlags) given() bool { return f.postgres != "" || f.redis != "" }

// check validates the fence flags before anything is connected.
func (f *fenceFlags) check(fs *flag.FlagSet) error {
	switch {
	case f.postgres != "" && f.redis != "":
		return fmt.Errorf("%w: --fence-postgres and --fence-redis each name the store to fence: give the one the handlers write through", errUsage)
	case f.unfenced && f.given():
		return fmt.Errorf("%w: --unfenced says no store is fenced: leave it out, or leave out --fence-postgres and --fence-redis", errUsage)
	}
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	switch {
	case f.postgres == "" && (given["fence-postgres-schema"] || given["fence-postgres-table-prefix"]):
		return fmt.Errorf("%w: --fence-postgres-schema and --fence-postgres-table-prefix go with --fence-postgres", errUsage)
	case f.redis == "" && given["fence-redis-namespace"]:
		return fmt.Errorf("%w: --fence-redis-namespace goes with --fence-redis", errUsage)
	}
	if f.redis != "" && f.redisNamespace != "" {
		if err := (jobs.Config{Namespace: f.redisNamespace}).Validate(); err != nil {
			return fmt.Errorf("%w: --fence-redis-namespace: %v", errUsage, err)
		}
	}
	return nil
}

func (f *fenceFlags) pgOptions() pgfence.Options {
	return pgfence.Options{Schema: f.pgSchema, TablePrefix: f.pgPrefix}
}

// name says which store f fences with, for messages.
func (f *fenceFlags) name() string {
	if f.postgres != "" {
		return "the PostgreSQL fence store (--fence-postgres)"
	}
	return "the Redis fence store (--fence-redis)"
}

// open connects to the store f names (nil and a no-op close when none is
// named); ns is the ledger's namespace, the redisfence store's by default.
// Bad options are bad usage, found before anything is reached. A Redis
// store is reached before it is returned, and so is a PostgreSQL one with
// ping (else on first use), so one that does not answer fails the command
// before anything is decided (an error matching jobs.ErrNotFencedOut).
func (f *fenceFlags) open(ctx context.Context, ns string, ping bool) (fence.Fencer, func(), error) {
	switch {
	case f.postgres != "":
		cfg, err := pgxpool.ParseConfig(f.postgres)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --fence-postgres: not a PostgreSQL URL or connection string", errUsage)
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg) // connects on first use
		if err != nil {
			return nil, nil, fmt.Errorf("%w: --fence-postgres: %v", errUsage, err)
		}
		s, err := pgfence.New(pool, f.pgOptions())
		if err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("%w: --fence-postgres-schema or --fence-postgres-table-prefix: %v", errUsage, err)
		}
		if !ping {
			return s, pool.Close, nil
		}
		pctx, cancel := context.WithTimeout(ctx, cli.PingTimeout)
		defer cancel()
		if err := pool.Ping(pctx); err != nil {
			pool.Close()
			return nil, nil, fmt.Errorf("%w: the PostgreSQL fence store (--fence-postgres) does not answer: %v; nothing was decided", jobs.ErrNotFencedOut, err)
		}
		return s, pool.Close, nil
	case f.redis != "":
		rdb, err := cli.ConnectRedisFlag(ctx, "--fence-redis", f.redis)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: the Redis fence store (--fence-redis): %w; nothing was decided", jobs.ErrNotFencedOut, err)
		}
		s, err := redisfence.New(rdb, redisfence.Config{Namespace: cmp.Or(f.redisNamespace, ns)})
		if err != nil {
			_ = rdb.Close()
			return nil, nil, fmt.Errorf("%w: --fence-redis-namespace: %v", errUsage, err)
		}
		return s, func() { _ = rdb.Close() }, nil
	}
	return nil, func() {}, nil
}
