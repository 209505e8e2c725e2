package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
)

// logFlags are the --log-level and --log-format flags. Bad values are
// usage errors when the flags are parsed.
type logFlags struct {
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

func (l *logFlags) add(fs *flag.FlagSet, level slog.Level) {
	l.format = "json"
	fs.TextVar(&l.level, "log-level", level, "log level: debug, info, warn or error")
	fs.Var(&l.format, "log-format", "log format: json or text (every line of the process in that format)")
}

// logger returns the process's logger, writing to w: one format for every
// line, durations as text ("10s", not nanoseconds).
func (l *logFlags) logger(w io.Writer) *slog.Logger {
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

// listen opens addr for flag, saying what to do when the port is taken.
func listen(flagName, addr string) (net.Listener, error) {
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
