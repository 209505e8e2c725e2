// Package luafunc runs Lua scripts as the functions of one Redis 7 function
// library (FCALL), with plain scripts (EVALSHA, EVAL) as the fallback.
//
// A script run with EVALSHA executes its whole text on every call: each
// shared helper it defines is made again (closures, tables), which costs
// more than most of the commands the script calls. A function library runs
// its top-level code once, when it is loaded; a call runs only its own
// function. The library is loaded lazily: the first call that finds it
// missing (a new server, a restart without persistence, another version of
// the library) loads it and runs again. A server without functions (Redis
// before 7) is detected once and every script then runs as a plain script.
// So is a library the server refuses to load (its code does not compile
// there): the refusal is logged once at error level and never retried,
// since every call would otherwise pay a failed FUNCTION LOAD.
// Each Script keeps its plain text, so a call can always fall back to EVAL:
// correctness never depends on the library being loaded.
//
// A script call is sent once: go-redis re-sends a command (or a whole
// pipeline) whose reply it did not get (a broken connection, a read
// timeout), but a script that ran and whose reply was lost would then run
// twice. Each call this package makes is marked not to be re-sent, on the
// caller's client as it is, so the caller gets the network error and
// decides (the call's outcome is unknown); the client's own commands keep
// their retries.
package luafunc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Library is one Redis function library. Its name and code are made on
// first use by the build function given to NewLibrary, so every Script of
// the library can be declared before the code exists.
type Library struct {
	build func() (name, code string)

	once       sync.Once
	name, code string

	// unavailable is set once a server answered that it has no functions,
	// or refused the library: scripts run as plain scripts from then on.
	unavailable atomic.Bool
	// rejected is the server's refusal of the library, if it refused it.
	rejected atomic.Pointer[error]
	// logger receives the refusal (see SetLogger).
	logger atomic.Pointer[slog.Logger]
}

// ErrRejected is matched by the error of a Load the server refused: the
// library's code does not load there (a compile error, a limit of its Lua).
var ErrRejected = errors.New("luafunc: the server refused the function library")

// NewLibrary returns a library whose name and code build returns (called
// once, on first use). The code must start with "#!lua name=<name>" and
// register each of its Scripts as <name>_<key>. The name should change
// with the code (a hash of it, say), so processes of two versions sharing
// one Redis each load their own library.
func NewLibrary(build func() (name, code string)) *Library { return &Library{build: build} }

func (l *Library) init() { l.once.Do(func() { l.name, l.code = l.build() }) }

// Name returns the library's name.
func (l *Library) Name() string { l.init(); return l.name }

// Code returns the library's code.
func (l *Library) Code() string { l.init(); return l.code }

// Available reports whether scripts run as functions (no server has said
// it lacks them or refused the library).
func (l *Library) Available() bool { return !l.unavailable.Load() }

// SetLogger sets the logger that receives the server's refusal of the
// library, unless one is set already: the first owner's logger serves the
// process (slog.Default until one is set).
func (l *Library) SetLogger(log *slog.Logger) {
	if log != nil {
		l.logger.CompareAndSwap(nil, log)
	}
}

// Rejected returns the server's refusal of the library (matching
// ErrRejected), or nil.
func (l *Library) Rejected() error {
	if p := l.rejected.Load(); p != nil {
		return *p
	}
	return nil
}

// reject records the server's refusal err, marks the library unavailable
// and logs the refusal once, at error level; it returns the recorded error.
func (l *Library) reject(err error) error {
	wrapped := fmt.Errorf("%w %s: %v", ErrRejected, l.Name(), err)
	if l.rejected.CompareAndSwap(nil, &wrapped) {
		log := l.logger.Load()
		if log == nil {
			log = slog.Default()
		}
		log.Error("Redis refused the function library: every script runs as a plain script (EVALSHA), which is several times slower",
			"library", l.Name(), "error", err)
	}
	l.unavailable.Store(true)
	return l.Rejected()
}

// Load loads (or replaces) the library on c's server, on every master of a
// Redis Cluster. A server without functions, or a user the server's ACLs
// do not let load or call functions, marks the library unavailable and is
// not an error. A server that refuses the code marks it unavailable too,
// and the error matches ErrRejected.
func (l *Library) Load(ctx context.Context, c redis.Scripter) error {
	code := l.Code()
	load := func(ctx context.Context, d redis.Cmdable) error {
		err := d.FunctionLoadReplace(ctx, code).Err()
		switch {
		case isUnavailable(err):
			l.unavailable.Store(true)
			return nil
		case isRefusal(err):
			return l.reject(err)
		}
		return err
	}
	switch d := c.(type) {
	case *redis.ClusterClient:
		return d.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return load(ctx, m) })
	case redis.Cmdable:
		return load(ctx, d)
	}
	return errors.New("luafunc: cannot load a library through this client")
}

// Script is one Lua script: a function of a Library, and the same script as
// plain text for EVALSHA and EVAL. Its methods have the signatures of
// go-redis's Script's; none of its calls is re-sent by go-redis.
type Script struct {
	lib *Library // nil: a plain script
	key string
	src string
	sha string

	once sync.Once
	fn   string
}

// NewScript returns the script lib registers as function <name>_<key>,
// whose plain form is src (the same code, run as a whole on every call).
func NewScript(lib *Library, key, src string) *Script {
	return &Script{lib: lib, key: key, src: src, sha: redis.NewScript(src).Hash()}
}

// NewPlain returns a script of no library: it always runs as a plain
// script (EVALSHA, EVAL).
func NewPlain(src string) *Script { return NewScript(nil, "", src) }

// Function returns the name the library registers the script under.
func (s *Script) Function() string {
	s.once.Do(func() { s.fn = s.lib.Name() + "_" + s.key })
	return s.fn
}

// Library returns the library the script belongs to (nil for a plain
// script).
func (s *Script) Library() *Library { return s.lib }

// functions reports whether the script runs as a function.
func (s *Script) functions() bool { return s.lib != nil && s.lib.Available() }

// EvalSha calls the script by name, without its text: FCALL, or EVALSHA
// where the server has no functions. The reply's error matches IsMissing
// when the server lacks the library or the script.
func (s *Script) EvalSha(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if s.functions() {
		if _, ok := c.(interface {
			FCall(context.Context, string, []string, ...any) *redis.Cmd
		}); ok {
			return once(ctx, c, "fcall", s.Function(), keys, args)
		}
	}
	return once(ctx, c, "evalsha", s.sha, keys, args)
}

// Eval runs the script with its text (EVAL): the retry of a call whose
// EvalSha found the script missing, which ran nothing.
func (s *Script) Eval(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return once(ctx, c, "eval", s.src, keys, args)
}

// Run calls the script by name and, when the server lacks it, loads the
// library (or, without functions, sends the script's text) and calls it
// again.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	cmd := s.EvalSha(ctx, c, keys, args...)
	if !IsMissing(cmd.Err()) {
		return cmd
	}
	if s.functions() {
		if err := s.lib.Load(ctx, c); err == nil && s.lib.Available() {
			return s.EvalSha(ctx, c, keys, args...)
		}
	}
	return s.Eval(ctx, c, keys, args...)
}

// onceCmd is a command go-redis sends once: it does not re-send it, nor a
// pipeline holding it, after a network error or a read timeout.
type onceCmd struct{ *redis.Cmd }

// NoRetry marks the command as not to be re-sent.
func (onceCmd) NoRetry() bool { return true }

// processor is what runs a command: a client, or a pipeline (which queues
// it).
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// once runs the script command name (fcall, evalsha or eval) with target
// (a function name, a SHA or a script's text) on c, not to be re-sent.
func once(ctx context.Context, c redis.Scripter, name, target string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 3+len(keys), 3+len(keys)+len(args))
	a[0], a[1], a[2] = name, target, len(keys)
	for i, k := range keys {
		a[3+i] = k
	}
	cmd := redis.NewCmd(ctx, append(a, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3) // routed on Redis Cluster by its first key
	}
	p, ok := c.(processor)
	if !ok {
		cmd.SetErr(fmt.Errorf("luafunc: cannot run a script through a %T", c))
		return cmd
	}
	_ = p.Process(ctx, onceCmd{cmd})
	return cmd
}

// IsMissing reports whether err says the server did not have the script
// or function called by name, has no functions at all, or does not let
// this user call them: the call ran nothing, so running it again is safe.
func IsMissing(err error) bool {
	if err == nil {
		return false // before re is declared: it escapes, and a success pays no allocation
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "NOSCRIPT") || strings.HasPrefix(msg, "ERR Function not found") || isUnavailable(err)
}

// isUnavailable reports whether err says the server has no such command
// (no functions), or refuses this user FCALL or FUNCTION (ACLs).
func isUnavailable(err error) bool {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return false
	}
	msg := strings.ToLower(re.Error())
	return strings.HasPrefix(msg, "err unknown command") ||
		strings.HasPrefix(msg, "noperm") && (strings.Contains(msg, "'fcall'") || strings.Contains(msg, "'function"))
}

// isRefusal reports whether err is the server's refusal of a library's code
// ("ERR Error compiling function", "ERR Error registering functions",
// metadata errors), as opposed to a passing condition (READONLY, LOADING,
// OOM, BUSY, a Cluster redirection, a broken connection) that a later load
// may get past.
func isRefusal(err error) bool {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return false
	}
	msg := strings.ToLower(re.Error())
	return strings.HasPrefix(msg, "err ") && (strings.Contains(msg, "function") || strings.Contains(msg, "librar"))
}

// Loader is what a batch of calls needs to recover from a missing library:
// implemented by Script.
type Loader interface {
	Library() *Library
}
