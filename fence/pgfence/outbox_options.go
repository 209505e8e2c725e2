package pgfence

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

// rowOptions are the enqueue options an outbox row keeps in its options
// column (migration 6): everything jobs.Prepare reports that the other
// columns do not hold, so a relayed job is the job Enqueue would have made.
type rowOptions struct {
	Headers      map[string]string `json:"headers,omitempty"`
	PartitionKey string            `json:"partition_key,omitempty"`
	Limit        *rowFlow          `json:"limit,omitempty"`
	Rate         *rowFlow          `json:"rate,omitempty"`
	Group        string            `json:"group,omitempty"`
	Unique       *rowUnique        `json:"unique,omitempty"`
}

// rowFlow is a concurrency limit (PerMS 0) or a rate limit.
type rowFlow struct {
	Key   string `json:"key"`
	Max   int    `json:"max"`
	PerMS int64  `json:"per_ms,omitempty"`
}

// rowUnique is jobs.UniqueOpts.
type rowUnique struct {
	ByArgs     bool         `json:"by_args,omitempty"`
	ByFields   []string     `json:"by_fields,omitempty"`
	ByPeriodMS int64        `json:"by_period_ms,omitempty"`
	ByState    []jobs.State `json:"by_state,omitempty"`
}

// optionsOf is the options column of prepared job p: "" (NULL) when it has
// none of them.
func optionsOf(p *jobs.Prepared) string {
	o := rowOptions{Headers: p.Headers, PartitionKey: p.PartitionKey, Group: p.Group}
	if p.LimitKey != "" {
		o.Limit = &rowFlow{Key: p.LimitKey, Max: p.LimitMax}
	}
	if p.RateKey != "" {
		o.Rate = &rowFlow{Key: p.RateKey, Max: p.RateMax, PerMS: p.RatePer.Milliseconds()}
	}
	if u := p.Unique; u != nil {
		o.Unique = &rowUnique{ByArgs: u.ByArgs, ByFields: u.ByFields, ByPeriodMS: u.ByPeriod.Milliseconds(), ByState: u.ByState}
	}
	if len(o.Headers) == 0 && o.PartitionKey == "" && o.Group == "" && o.Limit == nil && o.Rate == nil && o.Unique == nil {
		return ""
	}
	b, _ := json.Marshal(o) // strings, numbers and maps of strings always encode
	return string(b)
}

// parseOptions turns an options column back into enqueue options (none for
// ""); an error matches jobs.ErrInvalid (a row edited by hand).
func parseOptions(col string) ([]jobs.Option, error) {
	if col == "" {
		return nil, nil
	}
	var o rowOptions
	if err := json.Unmarshal([]byte(col), &o); err != nil {
		return nil, fmt.Errorf("%w: options column: %v", jobs.ErrInvalid, err)
	}
	var opts []jobs.Option
	for k, v := range o.Headers {
		opts = append(opts, jobs.Header(k, v))
	}
	if o.PartitionKey != "" {
		opts = append(opts, jobs.PartitionKey(o.PartitionKey))
	}
	if o.Limit != nil {
		opts = append(opts, jobs.Limit(o.Limit.Key, o.Limit.Max))
	}
	if o.Rate != nil {
		per, err := millis("rate per_ms", o.Rate.PerMS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, jobs.Rate(o.Rate.Key, o.Rate.Max, per))
	}
	if o.Group != "" {
		opts = append(opts, jobs.Group(o.Group))
	}
	if u := o.Unique; u != nil {
		period, err := millis("unique by_period_ms", u.ByPeriodMS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, jobs.Unique(jobs.UniqueOpts{ByArgs: u.ByArgs, ByFields: u.ByFields,
			ByPeriod: period, ByState: u.ByState}))
	}
	return opts, nil
}

// millis is ms milliseconds as a duration; an error (matching
// jobs.ErrInvalid) when they have none, rather than a value wrapped
// around into another, perhaps valid, one.
func millis(name string, ms int64) (time.Duration, error) {
	if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, fmt.Errorf("%w: options column: %s %d out of range", jobs.ErrInvalid, name, ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
