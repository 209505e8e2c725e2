package bank_test

import (
	"context"
	"sync"
	"testing"

	"github.com/fencedq/fencedq/examples/bank"
	"github.com/fencedq/fencedq/fence/pgfence"
	"github.com/fencedq/fencedq/internal/pgtest"
)

// TestPostgresStoreStartsConcurrently: workers started together on an
// empty database (docker-compose.yml starts two replicas at once) all set
// up the tables and the accounts.
func TestPostgresStoreStartsConcurrently(t *testing.T) {
	pool := pgtest.New(t)
	ctx := context.Background()
	const n = 8
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			s, err := bank.NewPostgresStore(ctx, pool, pgfence.Options{})
			if err == nil {
				err = s.Setup(ctx, []string{"acct-000", "acct-001"}, 100)
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
}
