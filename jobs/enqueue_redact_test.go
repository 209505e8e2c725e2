package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// errCardRefused is what leakyCardArgs' Validate wraps, to check that errors.Is
// still sees it through the redaction.
var errCardRefused = errors.New("card refused")

// leakyCardArgs quote their sensitive card number in what their methods
// return or panic with, as Panic and Encode ask.
type leakyCardArgs struct {
	Account string     `json:"account"`
	Card    string     `json:"card" fencedq:"sensitive"`
	Panic   string     `json:"panic,omitempty"`
	Encode  cardEncode `json:"encode"`
}

func (leakyCardArgs) Kind() string { return "leaky_card_args" }

func (a leakyCardArgs) Validate() error {
	if a.Panic == "Validate" {
		panic("bad card " + a.Card)
	}
	if a.Panic == "" && !a.Encode.Fail {
		return fmt.Errorf("%w: %s for account %s", errCardRefused, a.Card, a.Account)
	}
	return nil
}

func (a leakyCardArgs) Resource() string {
	if a.Panic == "Resource" {
		panic(fmt.Errorf("no resource for %s", a.Card))
	}
	return "acct:" + a.Account
}

// cardEncode fails to encode when Fail is set, with an error quoting the
// card number it was given.
type cardEncode struct {
	Fail bool
	Card string
}

func (e cardEncode) MarshalJSON() ([]byte, error) {
	if e.Fail {
		return nil, fmt.Errorf("cannot encode card %s", e.Card)
	}
	return []byte(`{}`), nil
}

// TestEnqueueRefusalsHideSensitiveValues: a Validate error, a panic in an
// args method and an encoding error at enqueue quote the args' sensitive
// card number; the error the caller gets (through Enqueue, EnqueueMany,
// middleware and Prepare) replaces it with [redacted], still matches
// ErrInvalid and the Validate error, and nothing is written.
func TestEnqueueRefusalsHideSensitiveValues(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	const card = "4111111111111111"
	plain := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	mw := jobs.NewClient(rdb, jobs.Config{Namespace: ns, EnqueueMiddleware: []jobs.EnqueueMiddleware{
		func(next jobs.EnqueueFunc) jobs.EnqueueFunc { return next },
	}})
	cases := map[string]leakyCardArgs{
		"Validate error": {Account: "acme", Card: card},
		"Validate panic": {Account: "acme", Card: card, Panic: "Validate"},
		"Resource panic": {Account: "acme", Card: card, Panic: "Resource"},
		"encoding error": {Account: "acme", Card: card, Encode: cardEncode{Fail: true, Card: card}},
	}
	for what, args := range cases {
		for name, c := range map[string]*jobs.Client{"plain": plain, "middleware": mw} {
			errs := map[string]error{}
			_, errs["Enqueue"] = c.Enqueue(ctx, args)
			_, errs["EnqueueMany"] = c.EnqueueMany(ctx, []jobs.Params{{Args: args}})
			_, errs["Prepare"] = jobs.Prepare(args)
			for call, err := range errs {
				if !errors.Is(err, jobs.ErrInvalid) {
					t.Errorf("%s, %s %s: err %v, want ErrInvalid", what, name, call, err)
					continue
				}
				if strings.Contains(err.Error(), card) {
					t.Errorf("%s, %s %s: the error quotes the card number: %q", what, name, call, err)
				}
				if what == "Validate error" && (!errors.Is(err, errCardRefused) || !strings.Contains(err.Error(), "for account acme")) {
					t.Errorf("%s, %s %s: %q, want the Validate error (errors.Is) with its other text", what, name, call, err)
				}
			}
		}
	}
	if keys, err := rdb.Keys(ctx, ns+":*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("refused enqueues wrote %v (%v)", keys, err)
	}
	b, _ := json.Marshal(leakyCardArgs{Card: card})
	if !strings.Contains(string(b), card) {
		t.Fatalf("the payload lost the card: %s", b)
	}
}
