package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// errForeignNamespace refuses a namespace that holds keys the demo did not
// create.
var errForeignNamespace = errors.New("the namespace holds keys the demo did not create")

// markerKey is the key the demo writes in a namespace it takes while the
// namespace is empty: a namespace with keys but without it is not the
// demo's. (Every key fencedq writes starts with "<namespace>:".)
func markerKey(ns string) string { return ns + ":fencedq-demo" }

// claimNamespace makes namespace ns of rdb the demo's before the demo
// writes to it: a namespace the demo marked before is taken again; an
// empty one is marked; one holding any other key is refused with
// errForeignNamespace, and nothing is written.
func claimNamespace(ctx context.Context, rdb redis.UniversalClient, ns string) error {
	n, err := rdb.Exists(ctx, markerKey(ns)).Result()
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	if n == 1 {
		return nil
	}
	key, err := anyKey(ctx, rdb, ns+":*")
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	if key != "" {
		return fmt.Errorf("%w (e.g. %s)", errForeignNamespace, key)
	}
	return rdb.Set(ctx, markerKey(ns), "created by fencedq-demo at "+time.Now().UTC().Format(time.RFC3339), 0).Err()
}

// anyKey returns a key matching the glob pattern, on every master of a
// cluster, or "" when there is none.
func anyKey(ctx context.Context, rdb redis.UniversalClient, pattern string) (string, error) {
	scan := func(ctx context.Context, c redis.Cmdable) (string, error) {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 10_000).Result()
			if err != nil || len(keys) > 0 {
				return first(keys), err
			}
			if cursor = next; cursor == 0 {
				return "", nil
			}
		}
	}
	cluster, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return scan(ctx, rdb)
	}
	var mu sync.Mutex
	var found string
	err := cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		k, err := scan(ctx, c)
		mu.Lock()
		if found == "" {
			found = k
		}
		mu.Unlock()
		return err
	})
	if found != "" {
		return found, nil
	}
	return "", err
}

func first(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
