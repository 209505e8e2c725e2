package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

func TestValidateNames(t *testing.T) {
	type check struct {
		name  string
		fn    func(string) error
		rule  string // part of the error text that states the rule
		valid []string
		bad   []string
	}
	checks := []check{
		{
			name: "namespace", fn: jobs.ValidateNamespace, rule: "1-64 letters, digits or ._:-",
			valid: []string{"fq", "tenant-1", "a.b_c:d", strings.Repeat("n", 64)},
			bad:   []string{"", "a{b", "a}b", "with space", "tab\t", "ünï", "a/b", strings.Repeat("n", 65)},
		},
		{
			name: "queue", fn: jobs.ValidateQueue, rule: "1-100 letters, digits or ._:-",
			valid: []string{"default", "emails:high", "q.1_x-y", strings.Repeat("q", 100)},
			bad:   []string{"", "{q}", "q q", "q\n", "ü", strings.Repeat("q", 101)},
		},
		{
			name: "kind", fn: jobs.ValidateKind, rule: "1-100 bytes of UTF-8 without whitespace, control characters or braces",
			valid: []string{"email", "billing.charge/v2", "zahlung-ü", "a:b@c#d", strings.Repeat("k", 100)},
			bad: []string{"", "with space", "tab\t", "nl\n", "nbsp\u00a0x", "brace{", "brace}", "nul\x00",
				"bad\xff", strings.Repeat("k", 101), strings.Repeat("ü", 51)},
		},
		{
			name: "resource", fn: jobs.ValidateResource, rule: "1-512 bytes of UTF-8 without control characters or braces",
			valid: []string{"account:42", "with space/and:more", "ürün-7", strings.Repeat("r", 512)},
			bad:   []string{"", "acct:{42}", "a}b", "nl\n", "nul\x00", "del\x7f", "bad\xff", strings.Repeat("r", 513)},
		},
		{
			name: "operation id", fn: jobs.ValidateOperationID, rule: "1-200 bytes of UTF-8 without control characters",
			valid: []string{"job-81f3/debit", "order 17: charge", "{braces} are fine", "ключ", strings.Repeat("o", 200)},
			bad:   []string{"", "nl\n", "cr\r", "nul\x00", "esc\x1b[0m", "bad\xff", strings.Repeat("o", 201)},
		},
	}
	for _, c := range checks {
		for _, v := range c.valid {
			if err := c.fn(v); err != nil {
				t.Errorf("%s %q: %v, want valid", c.name, v, err)
			}
		}
		for _, v := range c.bad {
			err := c.fn(v)
			if !errors.Is(err, jobs.ErrInvalid) {
				t.Errorf("%s %q: err = %v, want ErrInvalid", c.name, v, err)
				continue
			}
			if !strings.Contains(err.Error(), c.rule) {
				t.Errorf("%s %q: error %q does not state the rule %q", c.name, v, err, c.rule)
			}
			if len(err.Error()) > 300 {
				t.Errorf("%s: error text of %d bytes for a long value", c.name, len(err.Error()))
			}
		}
	}
}

// The limits are documented in names.go and in error texts.
func TestValidateResourceLimits(t *testing.T) {
	if jobs.MaxResourceLen != 512 || jobs.MaxOperationIDLen != 200 || jobs.MaxKindLen != 100 ||
		jobs.MaxQueueLen != 100 || jobs.MaxNamespaceLen != 64 {
		t.Fatal("a documented name limit changed; update the docs and the entry points")
	}
}

// TestJobIDRefusesSiblingKeySuffixes: a caller-chosen job id ending in a
// suffix of a job's sibling keys is refused, quoted clipped.
func TestJobIDRefusesSiblingKeySuffixes(t *testing.T) {
	for _, s := range ledger.JobKeySuffixes {
		if err := ledger.ValidateJobID("task-1" + s); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", s, err)
		}
	}
	if err := ledger.ValidateJobID(strings.Repeat("x", 150) + ":history"); err == nil || len(err.Error()) > 200 {
		t.Errorf("long id: %v, want a clipped refusal", err)
	}
	if err := ledger.ValidateJobID("task-1:historic"); err != nil {
		t.Error(err)
	}
}

// TestJobIDRefusesPathElements: a caller-chosen job id "." or ".." is
// refused, as a queue name is (URLs clean such a path element away, so no
// page or action of the dashboard could reach the job), and a delivery
// with one writes nothing.
func TestJobIDRefusesPathElements(t *testing.T) {
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	for _, id := range []string{".", ".."} {
		if err := ledger.ValidateJobID(id); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid", id, err)
		}
		_, err := l.ClaimDelivery(context.Background(), "default", ledger.Delivery{ID: id, Kind: "k", Owner: "o", Bridge: "asynq", TTL: time.Minute})
		if !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("delivery %q: %v, want ErrInvalid", id, err)
		}
		if _, err := l.Get(context.Background(), "default", id); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("refused delivery %q: %v, want no job", id, err)
		}
	}
	for _, id := range []string{"...", ".a", "a.."} {
		if err := ledger.ValidateJobID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
}
