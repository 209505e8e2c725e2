package dashboard_test

import (
	"strings"
	"testing"

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
