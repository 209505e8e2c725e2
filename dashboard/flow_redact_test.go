package dashboard_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/dashboard"
	"github.com/fencedq/fencedq/jobs"
)

// ibanArgs' resource, limit and rate keys and group are built from a
// sensitive field.
type ibanArgs struct {
	IBAN string `json:"iban" fencedq:"sensitive"`
}

func (ibanArgs) Kind() string           { return "iban" }
func (a ibanArgs) Resource() string     { return "account:" + a.IBAN }
func (a ibanArgs) Limit() (string, int) { return "payout:" + a.IBAN, 1 }
func (a ibanArgs) Group() string        { return "g." + a.IBAN }

// TestJobViewsRedactKeysBuiltFromSensitiveFields: the job page and the
// lists show a job's resource, limit key, group and what it waits for with
// the args' sensitive values redacted, as its args (they showed them
// whole).
func TestJobViewsRedactKeysBuiltFromSensitiveFields(t *testing.T) {
	const secret = "ES9121000418450200051332"
	f := newFixture(t)
	first := f.enqueue(ibanArgs{IBAN: secret})
	second := f.enqueue(ibanArgs{IBAN: secret}) // parked behind first's promised permit
	h := f.handler(dashboard.Options{})
	for _, id := range []string{first, second} {
		var v map[string]any
		body := string(getJSON(t, h, "/api/jobs/"+jobs.DefaultQueue+"/"+id, &v))
		if strings.Contains(body, secret) {
			t.Errorf("job %s: %s quotes the sensitive value", id, body)
		}
		if !strings.Contains(body, `"limit":"payout:`+jobs.Redacted) || !strings.Contains(body, `"group":"g.`+jobs.Redacted) {
			t.Errorf("job %s: %s; want its limit and group shown redacted", id, body)
		}
	}
	var list map[string]any
	if body := string(getJSON(t, h, "/api/jobs?state=pending", &list)); strings.Contains(body, secret) {
		t.Errorf("the pending list %s quotes the sensitive value", body)
	}
}

// mailArgs' limit and rate keys and group are built from a sensitive
// field.
type mailArgs struct {
	Email string `json:"email" fencedq:"sensitive"`
}

func (mailArgs) Kind() string           { return "mail" }
func (a mailArgs) Limit() (string, int) { return "export:" + a.Email, 1 }
func (a mailArgs) RateLimit() (string, int, time.Duration) {
	return "smtp:" + a.Email, 1, time.Hour
}
func (a mailArgs) Group() string { return "g:" + a.Email }

// flowKeys is what /api/limits shows of the keys and groups.
type flowKeys struct {
	Queues []struct {
		Queue  string `json:"queue"`
		Limits []struct {
			Key string `json:"key"`
		} `json:"limits"`
		Rates []struct {
			Key string `json:"key"`
		} `json:"rates"`
		Groups []struct {
			Name string `json:"name"`
		} `json:"groups"`
	} `json:"queues"`
}

// TestLimitsPageRedactsKeysBuiltFromSensitiveFields: the Limits page's
// limit and rate keys and fair groups, built from a sensitive field, show
// it redacted as its jobs' args do (they showed it whole); a key none of
// whose jobs can be read shows its name and a stable digest instead of the
// rest.
func TestLimitsPageRedactsKeysBuiltFromSensitiveFields(t *testing.T) {
	const secret = "ES9121000418450200051332"
	ctx := context.Background()
	f := newFixture(t)
	noRate, noLimit, noGroup := jobs.Rate("", 0, 0), jobs.Limit("", 0), jobs.Group("")
	// "export:<secret>": one job promised its permit, one parked behind it
	f.enqueue(mailArgs{Email: secret}, noRate, noGroup)
	f.enqueue(mailArgs{Email: secret}, noRate, noGroup)
	// "smtp:<secret>" in queue "rates": one job started, one deferred
	f.enqueue(mailArgs{Email: secret}, jobs.Queue("rates"), noLimit, noGroup)
	f.enqueue(mailArgs{Email: secret}, jobs.Queue("rates"), noLimit, noGroup)
	res, err := f.ledger.Claim(ctx, "rates", "w1", time.Minute, 2)
	must(t, err)
	if len(res.Jobs) != 1 {
		t.Fatalf("claim in rates: %+v; want one job started, one deferred", res)
	}
	// "g:<secret>" in queue "groups"
	f.enqueue(mailArgs{Email: secret}, jobs.Queue("groups"), noLimit, noRate)
	h := f.handler(dashboard.Options{})

	var v flowKeys
	body := string(getJSON(t, h, "/api/limits", &v))
	if strings.Contains(body, secret) {
		t.Errorf("/api/limits quotes the sensitive value: %s", body)
	}
	var limits, rates, groups []string
	for _, q := range v.Queues {
		for _, l := range q.Limits {
			limits = append(limits, l.Key)
		}
		for _, r := range q.Rates {
			rates = append(rates, r.Key)
		}
		for _, g := range q.Groups {
			groups = append(groups, g.Name)
		}
	}
	if !slices.Contains(limits, "export:"+jobs.Redacted) || !slices.Contains(rates, "smtp:"+jobs.Redacted) ||
		!slices.Contains(groups, "g:"+jobs.Redacted) {
		t.Errorf("limits %q, rates %q, groups %q; want export:, smtp: and g: each with %s: %s", limits, rates, groups, jobs.Redacted, body)
	}

	// no job of the keys can be read (their records gone): the page shows
	// each key's name and a digest of the rest, the same on every read
	ids, err := f.rdb.Keys(ctx, f.ledger.JobKey(jobs.DefaultQueue, "*")).Result()
	must(t, err)
	more, err := f.rdb.Keys(ctx, f.ledger.JobKey("rates", "*")).Result()
	must(t, err)
	most, err := f.rdb.Keys(ctx, f.ledger.JobKey("groups", "*")).Result()
	must(t, err)
	if len(ids) != 2 || len(more) != 2 || len(most) != 1 {
		t.Fatalf("job records %q %q %q; want 2, 2 and 1", ids, more, most)
	}
	must(t, f.rdb.Del(ctx, slices.Concat(ids, more, most)...).Err())
	again := string(getJSON(t, h, "/api/limits", &v))
	if strings.Contains(again, secret) {
		t.Errorf("/api/limits quotes the sensitive value once its jobs are gone: %s", again)
	}
	for _, want := range []string{`"key":"export:[redacted `, `"key":"smtp:[redacted `, `"name":"g:[redacted `} {
		if !strings.Contains(again, want) {
			t.Errorf("/api/limits once the jobs are gone: %s; want %s…", again, want)
		}
	}
	if third := string(getJSON(t, h, "/api/limits", &v)); third != again {
		t.Errorf("the digests changed between two reads:\n%s\n%s", again, third)
	}
}
