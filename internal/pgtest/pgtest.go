// Package pgtest gives tests a real PostgreSQL, isolated per test.
//
// [New] connects to DATABASE_URL, or to [DefaultURL] (user postgres, trust
// authentication, database test on 127.0.0.1:5432) when it is unset. Each
// test gets a fresh schema with a unique name; the returned pool's
// search_path points at it, and the schema is dropped (CASCADE) when the
// test ends, so tests can run in parallel against one server.
//
// When PostgreSQL cannot be reached, the test is skipped with a loud
// message, except when the CI environment variable is set: then it fails,
// because a green CI run must not hide skipped database tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is used when DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// InstallHint tells a reader how to get a PostgreSQL the tests can use.
const InstallHint = "set DATABASE_URL to a PostgreSQL you may create schemas in, or install and start one " +
	"(Debian/Ubuntu: apt-get install -y postgresql && pg_ctlcluster $(ls /etc/postgresql) main start; " +
	"macOS: brew install postgresql && brew services start postgresql) that accepts " + DefaultURL

// URL returns DATABASE_URL, or DefaultURL when it is unset.
func URL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// New returns a pool whose search_path is a fresh schema private to tb.
// The schema is dropped and the pool closed when the test ends.
func New(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()

	admin, err := connect(ctx, URL())
	if err != nil {
		unavailable(tb, err)
		return nil
	}
	schema := SchemaName(tb)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		_ = admin.Close(ctx)
		tb.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	_ = admin.Close(ctx)

	cfg, err := pgxpool.ParseConfig(admin.Config().ConnString())
	if err != nil {
		tb.Fatalf("pgtest: parse %s: %v", redact(URL()), err)
	}
	// The database may differ from the URL's when connect created it.
	cfg.ConnConfig.Database = admin.Config().Database
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pgtest: pool: %v", err)
	}
	tb.Cleanup(func() {
		pool.Close()
		// tb.Context is cancelled before cleanups run; keep its values only.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(tb.Context()), 30*time.Second)
		defer cancel()
		c, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
		if err != nil {
			tb.Logf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Logf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return pool
}

// connect opens one connection to url. When the URL is the default and its
// database does not exist yet, it creates the database first.
func connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	var pgErr *pgconn.PgError
	if err != nil && errors.As(err, &pgErr) && pgErr.Code == "3D000" && cfg.Database != "postgres" {
		// invalid_catalog_name: create the database from the maintenance one.
		mcfg := cfg.Copy()
		mcfg.Database = "postgres"
		m, merr := pgx.ConnectConfig(ctx, mcfg)
		if merr != nil {
			return nil, err
		}
		_, cerr := m.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Database}.Sanitize())
		_ = m.Close(ctx)
		if cerr != nil && !errors.As(cerr, &pgErr) {
			return nil, fmt.Errorf("%w (create database: %v)", err, cerr)
		}
		c, err = pgx.ConnectConfig(ctx, cfg)
	}
	return c, err
}

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	msg := fmt.Sprintf("pgtest: PostgreSQL at %s is unreachable: %v\n%s", redact(URL()), err, InstallHint)
	if os.Getenv("CI") != "" {
		tb.Fatal(msg + "\n(CI is set, so this is a failure, not a skip)")
	}
	tb.Skip("\n!!! SKIPPED: this test needs PostgreSQL !!!\n" + msg +
		"\n(set CI=1 to make this a failure)")
}

// SchemaName returns a fresh schema name for tb: lower-case, at most 63
// bytes, unique across runs.
func SchemaName(tb testing.TB) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '_'
	}, tb.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t_" + name + "_" + hex.EncodeToString(b[:])
}

// redact hides a password in a connection URL.
func redact(url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil || cfg.Password == "" {
		return url
	}
	return strings.Replace(url, cfg.Password, "xxxxx", 1)
}
