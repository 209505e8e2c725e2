package dashboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// Example mounts the dashboard under /ops with credentials for operator
// actions. In a program, serve mux with http.ListenAndServe (over TLS, or
// behind a TLS-terminating proxy, since the credentials travel with every
// action).
func Example() {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ns := fmt.Sprintf("example-dashboard-%d", time.Now().UnixNano())
	defer deleteKeys(rdb, ns) // reading the overview records the namespace's time
	client := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	defer client.Close()

	h, err := dashboard.New(nil, client, dashboard.Options{
		Username: "ops",
		Password: "a long random password",
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", h))

	serve := func(method, target string) *http.Response {
		rr := httptest.NewRecorder()
		mux.ServeHTTP(rr, httptest.NewRequest(method, target, nil))
		return rr.Result()
	}
	res := serve("GET", "/ops/api/overview")
	fmt.Println("GET /ops/api/overview:", res.StatusCode, res.Header.Get("Content-Type"))
	res = serve("GET", "/ops/")
	fmt.Println("GET /ops/:", res.StatusCode, res.Header.Get("Content-Type"))
	res = serve("POST", "/ops/api/jobs/default/some-job/resolve")
	fmt.Println("resolve without credentials:", res.StatusCode)
	// Output:
	// GET /ops/api/overview: 200 application/json; charset=utf-8
	// GET /ops/: 200 text/html; charset=utf-8
	// resolve without credentials: 401
}

// deleteKeys removes the example's keys from the shared Redis.
func deleteKeys(rdb *redis.Client, ns string) {
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, ns+":*", 500).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
}
