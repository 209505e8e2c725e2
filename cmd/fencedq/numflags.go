package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

// intFlag is an int flag that names its range (lo-hi) when given a number
// too large for an int, and calls a word not a whole number: the flag
// package's own int says "value out of range" without the range, and
// "parse error". A number of int outside lo-hi is left to the command,
// which refuses it in its own words (some take it with other flags only).
type intFlag struct {
	p      *int
	lo, hi int
}

// rangedInt defines an int flag of fs taking lo-hi (see intFlag).
func rangedInt(fs *flag.FlagSet, p *int, name string, def, lo, hi int, usage string) *int {
	*p = def
	fs.Var(&intFlag{p: p, lo: lo, hi: hi}, name, usage)
	return p
}

func (f *intFlag) String() string {
	if f == nil || f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

// TypeName names the flag's type in the help, as the flag package's int.
func (f *intFlag) TypeName() string { return "int" }

func (f *intFlag) Set(s string) error {
	n, err := parseInt(s, 0, math.MinInt, math.MaxInt) // base 0, as the flag package's int
	if errors.Is(err, errNotNumber) {
		return fmt.Errorf("%q is %w (want %d-%d)", s, errNotNumber, f.lo, f.hi)
	}
	if err != nil {
		return fmt.Errorf("%s is outside %d-%d", s, f.lo, f.hi)
	}
	*f.p = n
	return nil
}

// parseInt parses s as a whole number of lo-hi in base (0: by its prefix,
// as strconv.ParseInt): a number outside it (even one too large for an
// int) is "outside lo-hi", a word "not a whole number".
func parseInt(s string, base, lo, hi int) (int, error) {
	n, err := strconv.ParseInt(s, base, strconv.IntSize)
	switch {
	case errors.Is(err, strconv.ErrRange) || err == nil && (n < int64(lo) || n > int64(hi)):
		return 0, fmt.Errorf("%s is outside %d-%d", s, lo, hi)
	case err != nil:
		return 0, fmt.Errorf("%q is %w (want %d-%d)", s, errNotNumber, lo, hi)
	}
	return int(n), nil
}

// durationFlag is a time.Duration flag that says a duration too long for
// time.Duration is out of range (the flag package's says "parse error").
type durationFlag struct{ p *time.Duration }

// rangedDuration defines a duration flag of fs (see durationFlag).
func rangedDuration(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	*p = def
	fs.Var(&durationFlag{p: p}, name, usage)
	return p
}

func (f *durationFlag) String() string {
	if f == nil || f.p == nil {
		return "0s"
	}
	return f.p.String()
}

// TypeName names the flag's type in the help, as the flag package's
// duration.
func (f *durationFlag) TypeName() string { return "duration" }

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.p = d
	return nil
}

// errNotNumber is parseInt's error for a word (not a number out of range).
var errNotNumber = errors.New("not a whole number")

var digits = regexp.MustCompile(`[0-9]+`)

// parseDuration is time.ParseDuration, whose error for a well-formed
// duration too long for time.Duration (over about 292 years) is the one
// for a malformed one; this one says it is out of range.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if _, zero := time.ParseDuration(digits.ReplaceAllString(s, "0")); zero == nil {
		return 0, fmt.Errorf("%s is out of range (at most %v)", s, time.Duration(1<<63-1))
	}
	return 0, fmt.Errorf("%q is not a duration (e.g. 90s, 1h30m)", s)
}
