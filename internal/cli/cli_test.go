package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLogsPrintDurationsAsDurations: in both formats.
func TestLogsPrintDurationsAsDurations(t *testing.T) {
	for _, format := range []logFormat{"json", "text"} {
		var buf bytes.Buffer
		l := LogFlags{level: slog.LevelInfo, format: format}
		l.Logger(&buf).Info("pool started", "lease_ttl", 10*time.Second, "group", slog.GroupValue(slog.Duration("wait", 1500*time.Millisecond)))
		out := buf.String()
		want := map[logFormat][]string{"json": {`"lease_ttl":"10s"`, `"wait":"1.5s"`}, "text": {"lease_ttl=10s", "group.wait=1.5s"}}[format]
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q lacks %s", format, out, w)
			}
		}
	}
}

// TestRunExitCodes: 0 on success and --help, 2 on bad usage (flags,
// arguments, the environment, an ErrUsage from the command), 1 on any
// other error; errors are one line prefixed with the command's name.
func TestRunExitCodes(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		env     string
		err     error
		code    int
		stdout  string
		errLine string
	}{
		{name: "ok", args: []string{"--n", "3"}, code: 0, stdout: "n=3\n"},
		{name: "help", args: []string{"--help"}, code: 0, stdout: "Usage: tool sub [flags]\n\nDoes a thing.\n\nFlags (or FENCEDQ_<FLAG> environment variables):\n"},
		{name: "bad flag", args: []string{"--nope"}, code: 2, errLine: "tool sub: flag provided but not defined: -nope\nRun 'tool sub --help' for its flags.\n"},
		{name: "argument", args: []string{"extra"}, code: 2, errLine: "tool sub: unexpected argument \"extra\"\n"},
		{name: "env", env: "lots", code: 2, errLine: "tool sub: usage: FENCEDQ_N=\"lots\": parse error\n"},
		{name: "env loses to flag", args: []string{"--n", "4"}, env: "lots", code: 0, stdout: "n=4\n"},
		{name: "usage error", err: fmt.Errorf("%w: bad", ErrUsage), code: 2, errLine: "tool sub: usage: bad\n"},
		{name: "failure", err: errors.New("redis down"), code: 1, errLine: "tool sub: redis down\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("FENCEDQ_N", c.env)
			}
			fs := flag.NewFlagSet("tool sub", flag.ContinueOnError)
			n := fs.Int("n", 1, "a number")
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), fs, "Does a thing", func(_ context.Context, out io.Writer) error {
				if c.err != nil {
					return c.err
				}
				_, err := io.WriteString(out, "n="+fs.Lookup("n").Value.String()+"\n")
				return err
			}, c.args, &stdout, &stderr)
			if code != c.code || !strings.HasPrefix(stdout.String(), c.stdout) || stderr.String() != c.errLine {
				t.Errorf("code %d (want %d), n %d, stdout %q, stderr %q (want %q)", code, c.code, *n, stdout.String(), stderr.String(), c.errLine)
			}
		})
	}
}

// TestRedactURL: a password never reaches a message.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:secret@host:6379/0":     "redis://***@host:6379/0",
		"redis://user:secret@host:6379/0": "redis://***@host:6379/0",
		"redis://host:6379/0":             "redis://host:6379/0",
	} {
		if got := RedactURL(in); got != want || strings.Contains(got, "secret") {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
