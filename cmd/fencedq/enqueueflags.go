package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/fencedq/fencedq/jobs"
)

// flowFlags are enqueue's options beyond the job itself: headers, limits,
// fair group and partition key. A kind whose Go type names a limit, group
// or partition key is enqueued raw only with that option given.
type flowFlags struct {
	headers                  headerFlag
	limit, rate, group, part string
}

func (f *flowFlags) add(fs *flag.FlagSet) {
	fs.Var(&f.headers, "header", "a job header as key=value (repeatable)")
	fs.StringVar(&f.limit, "limit", "", "concurrency limit as key=max, e.g. export:cust-42=5 (jobs.Limit)")
	fs.StringVar(&f.rate, "rate", "", "rate limit as key=max/period, e.g. provider:api=100/1s (jobs.Rate)")
	fs.StringVar(&f.group, "group", "", "fair group (jobs.Group)")
	fs.StringVar(&f.part, "partition-key", "", "partition key of a partitioned queue (jobs.PartitionKey)")
}

// options turns the flags into enqueue options; a malformed flag is a
// usage error.
func (f *flowFlags) options() ([]jobs.Option, error) {
	var opts []jobs.Option
	for _, h := range f.headers {
		opts = append(opts, jobs.Header(h[0], h[1]))
	}
	if f.limit != "" {
		key, max, err := keyMax("--limit", f.limit)
		if err != nil {
			return nil, err
		}
		opts = append(opts, jobs.Limit(key, max))
	}
	if f.rate != "" {
		i := strings.LastIndexByte(f.rate, '/')
		if i < 0 {
			return nil, fmt.Errorf("%w: --rate %q: want key=max/period, e.g. provider:api=100/1s", errUsage, f.rate)
		}
		per, err := parseDuration(f.rate[i+1:])
		if err != nil {
			return nil, fmt.Errorf("%w: --rate %q: period %v", errUsage, f.rate, err)
		}
		key, max, err := keyMax("--rate", f.rate[:i])
		if err != nil {
			return nil, err
		}
		opts = append(opts, jobs.Rate(key, max, per))
	}
	if f.group != "" {
		opts = append(opts, jobs.Group(f.group))
	}
	if f.part != "" {
		opts = append(opts, jobs.PartitionKey(f.part))
	}
	return opts, nil
}

// keyMax splits key=max at the last '=' (a key may hold one).
func keyMax(flagName, s string) (string, int, error) {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 {
		return "", 0, fmt.Errorf("%w: %s %q: want key=max", errUsage, flagName, s)
	}
	max, err := parseInt(s[i+1:], 10, 1, jobs.MaxFlowMax)
	if errors.Is(err, errNotNumber) {
		return "", 0, fmt.Errorf("%w: %s %q: max is not a number", errUsage, flagName, s)
	}
	if err != nil {
		return "", 0, fmt.Errorf("%w: %s %q: max %v", errUsage, flagName, s, err)
	}
	return s[:i], max, nil
}

// headerFlag collects repeated --header key=value flags.
type headerFlag [][2]string

func (h *headerFlag) String() string { return fmt.Sprint(*h) }

func (h *headerFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, not %q", s)
	}
	*h = append(*h, [2]string{k, v})
	return nil
}
