package epoch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelTimeout bounds one Sentinel's answer: a Sentinel that is down or
// cut off must not hold up a refresh for long.
const sentinelTimeout = time.Second

// ErrUnknownMaster means the Sentinels that answered monitor no master of
// the name given (a wrong FailoverOptions.MasterName): a configuration
// error, not an outage.
var ErrUnknownMaster = errors.New("no Sentinel monitors the master")

// ValidateSentinel checks the Sentinel options a tracker asks for the
// epoch: nil options are fine (no Sentinel); otherwise they must name the
// master and at least one Sentinel, or no claim or acquisition could ever
// mint a token.
func ValidateSentinel(fo *redis.FailoverOptions) error {
	switch {
	case fo == nil:
		return nil
	case fo.MasterName == "":
		return errors.New("sentinel options name no master (MasterName is empty)")
	case len(fo.SentinelAddrs) == 0:
		return fmt.Errorf("sentinel options for master %q name no Sentinel (SentinelAddrs is empty)", fo.MasterName)
	}
	for i, a := range fo.SentinelAddrs {
		if strings.TrimSpace(a) == "" {
			return fmt.Errorf("sentinel options for master %q: SentinelAddrs[%d] is empty", fo.MasterName, i)
		}
	}
	return nil
}

// sentinelSource asks every Sentinel of a failover client for the master's
// config epoch (SENTINEL MASTER <name>, field config-epoch) and takes the
// highest answer: the Sentinel that led the last failover, and any that
// heard of it, report its epoch; one that has not heard yet reports less.
type sentinelSource struct{ opts *redis.FailoverOptions }

// Epoch implements Source. It fails only when no Sentinel answers with the
// epoch: with ErrUnknownMaster when those that answered monitor no master
// of that name.
func (s sentinelSource) Epoch(ctx context.Context) (uint64, error) {
	var (
		mu      sync.Mutex
		best    uint64
		ok      bool
		unknown bool
		errs    []error
		wg      sync.WaitGroup
	)
	for _, addr := range s.opts.SentinelAddrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := s.ask(ctx, addr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("sentinel %s: %w", addr, err))
				unknown = unknown || strings.Contains(err.Error(), "No such master")
				return
			}
			if !ok || e > best {
				best, ok = e, true
			}
		}()
	}
	wg.Wait()
	if !ok && unknown {
		return 0, fmt.Errorf("%w named %q (check the Sentinel options' MasterName): %w", ErrUnknownMaster, s.opts.MasterName, errors.Join(errs...))
	}
	if len(s.opts.SentinelAddrs) == 0 {
		return 0, fmt.Errorf("no Sentinel to ask for the config epoch of %q (SentinelAddrs is empty)", s.opts.MasterName)
	}
	if !ok {
		return 0, fmt.Errorf("no Sentinel reported the config epoch of %q: %w", s.opts.MasterName, errors.Join(errs...))
	}
	return best, nil
}

// ask asks one Sentinel.
func (s sentinelSource) ask(ctx context.Context, addr string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, sentinelTimeout)
	defer cancel()
	sc := redis.NewSentinelClient(&redis.Options{
		Addr: addr, Username: s.opts.SentinelUsername, Password: s.opts.SentinelPassword,
		TLSConfig: s.opts.TLSConfig, Dialer: s.opts.Dialer,
		DialTimeout: sentinelTimeout, ReadTimeout: sentinelTimeout, WriteTimeout: sentinelTimeout,
		MaxRetries: -1, PoolSize: 1,
	})
	defer sc.Close()
	m, err := sc.Master(ctx, s.opts.MasterName).Result()
	if err != nil {
		return 0, err
	}
	e, err := strconv.ParseUint(m["config-epoch"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("config-epoch %q: %w", m["config-epoch"], err)
	}
	return e, nil
}
