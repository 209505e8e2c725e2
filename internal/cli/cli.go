// Package cli is the plumbing the repository's commands share (cmd/fencedq
// and the bank example's bank-worker): flags that FENCEDQ_<FLAG>
// environment variables can set, one-line errors with exit codes, the
// --log-level and --log-format flags, Redis URLs, listening with a clear
// message when a port is taken, and serving /healthz.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrUsage marks bad flags or arguments: Run exits 2 on an error wrapping
// it.
var ErrUsage = errors.New("usage")

// EnvPrefix prefixes the environment variable that sets a flag:
// FENCEDQ_<FLAG>, upper case, dashes as underscores.
const EnvPrefix = "FENCEDQ_"

// Run parses args into fs, sets every flag not given from its FENCEDQ_<FLAG>
// environment variable, and runs do, which writes its output to stdout. It
// returns the exit code: 0 when do succeeds (or on --help, which prints
// summary and the flags on stdout), 2 on bad usage (a bad flag, an argument,
// or an error wrapping ErrUsage), 1 on any other error. Errors are one line
// on stderr, prefixed with fs.Name(), the command as typed (e.g. "fencedq
// inspect"), with their text passed through Escape.
func Run(ctx context.Context, fs *flag.FlagSet, summary string, do func(context.Context, io.Writer) error, args []string, stdout, stderr io.Writer) int {
	QuietRedis()
	name := fs.Name()
	// The flag package would print the usage on every parse error and on
	// --help; the usage is printed here instead, once.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintf(stdout, "Usage: %s [flags]\n\n%s.\n\nFlags (or %s<FLAG> environment variables):\n", name, summary, EnvPrefix)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprint(stderr, Escapef("%s: %v\nRun '%s --help' for its flags.\n", name, err, name))
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	if err := applyEnv(fs); err != nil {
		fmt.Fprint(stderr, Escapef("%s: %v\n", name, err))
		return 2
	}
	if err := do(ctx, stdout); err != nil {
		fmt.Fprint(stderr, Escapef("%s: %v\n", name, err))
		if errors.Is(err, ErrUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// applyEnv sets every flag not given on the command line from
// FENCEDQ_<FLAG>.
func applyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []string
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		key := EnvPrefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", key, v, err))
			}
		}
	})
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("%w: %s", ErrUsage, strings.Join(errs, "; "))
	}
	return nil
}

// quietRedis drops the Redis client's own log lines (its dial retries).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// QuietRedis silences the Redis client's own logging for the process: a
// command reports a failure once, as its error.
func QuietRedis() { redis.SetLogger(quietRedis{}) }

// PingTimeout bounds the first contact with Redis.
const PingTimeout = 5 * time.Second

// ConnectRedis opens a Redis client from the --redis URL and pings it;
// several comma-separated URLs make a cluster client. A malformed URL is a
// usage error; a Redis that does not answer is named (password hidden).
func ConnectRedis(ctx context.Context, url string) (redis.UniversalClient, error) {
	var rdb redis.UniversalClient
	if strings.Contains(url, ",") {
		var addrs []string
		var opt *redis.Options
		for _, u := range strings.Split(url, ",") {
			o, err := redis.ParseURL(strings.TrimSpace(u))
			if err != nil {
				return nil, fmt.Errorf("%w: --redis %q: %v", ErrUsage, u, err)
			}
			addrs = append(addrs, o.Addr)
			opt = o
		}
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: opt.Username, Password: opt.Password})
	} else {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("%w: --redis %q: %v", ErrUsage, url, err)
		}
		rdb = redis.NewClient(opt)
	}
	pctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis %s does not answer: %w", RedactURL(url), err)
	}
	return rdb, nil
}

// RedactURL hides a password in a URL for messages.
func RedactURL(u string) string {
	at := strings.LastIndex(u, "@")
	scheme := strings.Index(u, "://")
	if at < 0 || scheme < 0 {
		return u
	}
	return u[:scheme+3] + "***" + u[at:]
}

// LogFlags are the --log-level and --log-format flags. Bad values are
// usage errors when the flags are parsed.
type LogFlags struct {
	level  slog.Level
	format logFormat
}

// logFormat is "json" or "text".
type logFormat string

func (f *logFormat) String() string { return string(*f) }

func (f *logFormat) Set(s string) error {
	if s != "json" && s != "text" {
		return errors.New("want json or text")
	}
	*f = logFormat(s)
	return nil
}

// Add defines the flags on fs: JSON logs at level unless told otherwise.
func (l *LogFlags) Add(fs *flag.FlagSet, level slog.Level) {
	l.format = "json"
	fs.TextVar(&l.level, "log-level", level, "log level: debug, info, warn or error")
	fs.Var(&l.format, "log-format", "log format: json or text (every line of the process in that format)")
}

// Logger returns the process's logger, writing to w: one format for every
// line, durations as text ("10s", not nanoseconds).
func (l *LogFlags) Logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: l.level, ReplaceAttr: durationsAsText}
	if l.format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// Listen opens addr, given by the flag flagName, saying what to do when the
// port is taken.
func Listen(flagName, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%s %s: the address is in use (another process serves on it); choose a free port, or port 0 for any (e.g. %s 127.0.0.1:0): %w",
			flagName, addr, flagName, err)
	}
	return nil, fmt.Errorf("%s %s: %w", flagName, addr, err)
}

// Serve serves h on ln until ctx ends, then shuts the server down (waiting
// up to 5s for requests in flight).
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Healthz answers "ok" while Redis answers, 503 otherwise.
func Healthz(ping func(context.Context) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := ping(r.Context()); err != nil {
			http.Error(w, "redis: unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	}
}
