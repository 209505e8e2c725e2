package epoch

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// ErrNotSentinel means an address of FailoverOptions.SentinelAddrs is
// answered by a Redis server that is not a Sentinel (it knows no SENTINEL
// command): a data node given as a Sentinel, a configuration error, not an
// outage.
var ErrNotSentinel = errors.New("the address is a Redis server, not a Sentinel")

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
// epoch: with ErrNotSentinel when an address answered as a Redis server
// that is not a Sentinel, else with ErrUnknownMaster when those that
// answered monitor no master of that name.
func (s sentinelSource) Epoch(ctx context.Context) (uint64, error) {
	p := s.poll(ctx)
	if !p.ok {
		return 0, p.err(s.opts)
	}
	return p.best, nil
}

// Check asks every Sentinel as Epoch does, and fails on any configuration
// error even when another Sentinel answered: an address that is a Redis
// server, not a Sentinel (ErrNotSentinel, naming it), or a master name no
// Sentinel that answered monitors (ErrUnknownMaster). Sentinels that do
// not answer are an outage: nil when another gave the epoch.
func (s sentinelSource) Check(ctx context.Context) error {
	p := s.poll(ctx)
	if len(p.notSentinel) > 0 || !p.ok {
		return p.err(s.opts)
	}
	return nil
}

// polled is what asking every Sentinel once gave.
type polled struct {
	best        uint64
	ok          bool     // some Sentinel gave the epoch
	unknown     bool     // some Sentinel monitors no master of the name
	notSentinel []string // addresses a plain Redis server answered, sorted
	errs        []error
}

// poll asks every Sentinel of the options at once.
func (s sentinelSource) poll(ctx context.Context) polled {
	var (
		mu sync.Mutex
		p  polled
		wg sync.WaitGroup
	)
	for _, addr := range s.opts.SentinelAddrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := s.ask(ctx, addr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				p.errs = append(p.errs, fmt.Errorf("sentinel %s: %w", addr, err))
				p.unknown = p.unknown || strings.Contains(err.Error(), "No such master")
				if notSentinel(err) {
					p.notSentinel = append(p.notSentinel, addr)
				}
				return
			}
			if !p.ok || e > p.best {
				p.best, p.ok = e, true
			}
		}()
	}
	wg.Wait()
	slices.Sort(p.notSentinel)
	slices.SortFunc(p.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return p
}

// err describes a poll that found a configuration error or no epoch.
func (p polled) err(fo *redis.FailoverOptions) error {
	switch {
	case len(p.notSentinel) > 0:
		return fmt.Errorf("%w: %s (check the Sentinel options' SentinelAddrs: they name Sentinels, by default on port 26379, not the Redis servers of master %q)",
			ErrNotSentinel, strings.Join(p.notSentinel, ", "), fo.MasterName)
	case p.unknown:
		return fmt.Errorf("%w named %q (check the Sentinel options' MasterName): %w", ErrUnknownMaster, fo.MasterName, errors.Join(p.errs...))
	case len(fo.SentinelAddrs) == 0:
		return fmt.Errorf("no Sentinel to ask for the config epoch of %q (SentinelAddrs is empty)", fo.MasterName)
	}
	return fmt.Errorf("no Sentinel reported the config epoch of %q: %w", fo.MasterName, errors.Join(p.errs...))
}

// notSentinel reports whether err is a Redis server's answer to a SENTINEL
// command it does not know: the server is not a Sentinel.
func notSentinel(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unknown command") && strings.Contains(msg, "sentinel")
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
