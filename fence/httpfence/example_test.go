package httpfence_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/httpfence"
	"github.com/fencedq/fencedq/fence/redisfence"
)

func Example() {
	ctx := context.Background()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-%d", time.Now().UnixNano())
	store, _ := redisfence.New(rdb, redisfence.Config{Namespace: ns, EffectTTL: time.Minute})
	defer rdb.Del(ctx, store.HighWaterKey("doc:1"), store.EffectKey("doc:1", "job-1"), store.IndexKey("job-1"), store.ClaimsKey("job-1"))

	// A service that is itself protected storage.
	runs := 0
	svc := httptest.NewServer(httpfence.Middleware(store, httpfence.Options{})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs++
			w.WriteHeader(http.StatusCreated)
		})))
	defer svc.Close()

	// A worker's client: the fence travels in the request context.
	client := &http.Client{Transport: &httpfence.Transport{}}
	post := func(f fence.Fence) {
		req, _ := http.NewRequestWithContext(fence.NewContext(ctx, f), http.MethodPut, svc.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		// CheckResponse turns the middleware's answers into fence errors.
		fmt.Println(resp.StatusCode, httpfence.CheckResponse(resp))
	}
	post(fence.Fence{Resource: "doc:1", Token: 34, Owner: "worker-b", OperationID: "job-1"})
	post(fence.Fence{Resource: "doc:1", Token: 34, Owner: "worker-b", OperationID: "job-1"})
	post(fence.Fence{Resource: "doc:1", Token: 33, Owner: "worker-a", OperationID: "job-2"})
	fmt.Println("handler runs:", runs)
	// Output:
	// 201 <nil>
	// 200 fence: operation "job-1" already applied on "doc:1" with token 34
	// 409 fence: stale token 33 for "doc:1" (storage has token 34)
	// handler runs: 1
}
