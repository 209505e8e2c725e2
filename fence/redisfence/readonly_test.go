package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A store whose Redis refuses writes for a reason of its own (a primary a
// failover demoted to a read-only replica, reached by its address; a
// primary short of min-replicas-to-write) fails Apply with Redis's error:
// not fence.ErrRefused nor a claim that one of its keys holds the wrong
// type, which would send an operator to repair data that is sound. A
// retry once Redis takes writes applies the operation.
func TestApplyOnARedisRefusingWritesSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name, want    string
		refuse, allow func(context.Context, *testing.T, *redistest.Server)
	}{
		{"read-only replica", "READONLY",
			func(ctx context.Context, t *testing.T, srv *redistest.Server) {
				// demoted, and cut off from the new primary
				if err := srv.Client().ReplicaOf(ctx, "127.0.0.1", fmt.Sprint(redistest.FreePort(t))).Err(); err != nil {
					t.Fatal(err)
				}
			},
			func(ctx context.Context, t *testing.T, srv *redistest.Server) {
				if err := srv.Client().ReplicaOf(ctx, "NO", "ONE").Err(); err != nil {
					t.Fatal(err)
				}
			}},
		{"min-replicas-to-write", "NOREPLICAS",
			func(ctx context.Context, t *testing.T, srv *redistest.Server) {
				if err := srv.Client().ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
					t.Fatal(err)
				}
			},
			func(ctx context.Context, t *testing.T, srv *redistest.Server) {
				if err := srv.Client().ConfigSet(ctx, "min-replicas-to-write", "0").Err(); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t, redistest.Options{})
			store, err := redisfence.New(srv.Client(), redisfence.Config{Namespace: redistest.Namespace(t)})
			if err != nil {
				t.Fatal(err)
			}
			fc := fence.Fence{Resource: "account:1", Token: 7, Owner: "w1", OperationID: "debit:1"}
			log := store.DataKey(fc.Resource, "log")
			tc.refuse(ctx, t, srv)
			err = store.Apply(ctx, fc, redisfence.RPush(log, "debit"))
			if err == nil || errors.Is(err, fence.ErrRefused) || errors.Is(err, redisfence.ErrMutation) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("apply on a Redis refusing writes: %v; want Redis's %s error, not a refusal for the data", err, tc.want)
			}
			tc.allow(ctx, t, srv)
			if err := store.Apply(ctx, fc, redisfence.RPush(log, "debit")); err != nil {
				t.Fatalf("apply once Redis takes writes: %v", err)
			}
			if n, err := srv.Client().LLen(ctx, log).Result(); err != nil || n != 1 {
				t.Fatalf("the log holds %d entries (%v), want 1", n, err)
			}
		})
	}
}
