package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/jobs"
)

// TestNumericFlagsOutOfRangeSayTheRange: a number too large for its flag
// (beyond int, or beyond what the flag takes) is refused as out of range
// with the range, never as "not a number" or a bare "parse error"; a word
// is still refused as not a number.
func TestNumericFlagsOutOfRangeSayTheRange(t *testing.T) {
	const huge = "99999999999999999999999"
	enq := []string{"enqueue", "--kind", "x", "--args", "{}"}
	cases := []struct {
		args []string
		want string
	}{
		{append(enq, "--limit", "k="+huge), fmt.Sprintf("--limit \"k=%s\": max %s is outside 1-%d", huge, huge, jobs.MaxFlowMax)},
		{append(enq, "--limit", "k=2000000"), fmt.Sprintf("max 2000000 is outside 1-%d", jobs.MaxFlowMax)},
		{append(enq, "--limit", "k=0"), fmt.Sprintf("max 0 is outside 1-%d", jobs.MaxFlowMax)},
		{append(enq, "--rate", "k="+huge+"/1s"), fmt.Sprintf("max %s is outside 1-%d", huge, jobs.MaxFlowMax)},
		{append(enq, "--rate", "k=5/"+huge+"h"), "period " + huge + "h is out of range"},
		{append(enq, "--max-retries", huge), fmt.Sprintf("%s is outside 0-%d", huge, jobs.MaxMaxRetries)},
		{append(enq, "--delay", huge+"h"), huge + "h is out of range"},
		{append(enq, "--timeout", huge+"s"), huge + "s is out of range"},
		{[]string{"inspect", "--state", "dead", "--limit", huge}, fmt.Sprintf("%s is outside 1-%d", huge, jobs.MaxListWindow)},
		{[]string{"inspect", "--state", "dead", "--offset", huge}, fmt.Sprintf("%s is outside 0-%d", huge, jobs.MaxListWindow)},
		{[]string{"partitions", "--queue", "q", "--set", huge}, fmt.Sprintf("%s is outside 1-%d", huge, jobs.MaxPartitions)},
		{[]string{"schedules", "--ticks", huge}, huge + " is outside 0-100"},
		{[]string{"workflow", "inspect", "--limit", huge}, huge + " is outside 1-1000"},
		{[]string{"inspect", "--state", "dead", "--replicas", huge}, huge + " is outside 0-1000"},
		{[]string{"cancel", "--job", "x", "--actor", "a", "--note", "n", "--seen-state", "dead", "--seen-token", huge}, "--seen-token " + huge + " is outside"},
		{[]string{"cancel", "--job", "x", "--actor", "a", "--note", "n", "--seen-state", "dead", "--seen-token", "1", "--seen-runs", huge}, "--seen-runs " + huge + " is outside"},
		// words stay "not a number"
		{append(enq, "--limit", "k=many"), "max is not a number"},
		{append(enq, "--max-retries", "many"), "not a whole number"},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: code %d, stderr %q (want 2 and %q)", c.args, code, errOut, c.want)
		}
		if strings.Contains(c.args[len(c.args)-1], huge) && (strings.Contains(errOut, "not a number") || strings.Contains(errOut, "parse error")) {
			t.Errorf("%v: a number out of range is called no number: %q", c.args, errOut)
		}
	}
}

// TestNumericFlagsNameTheirTypeInTheHelp: the help names a ranged flag's
// type as the flag package names its own ("-max-retries int", "-delay
// duration"), not "value".
func TestNumericFlagsNameTheirTypeInTheHelp(t *testing.T) {
	_, out, errOut := runCLI(t, "enqueue", "--help")
	help := out + errOut
	for _, want := range []string{"  -max-retries int\n", "  -delay duration\n", "  -timeout duration\n", "  -replicas int\n"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "  -max-retries value") {
		t.Errorf("help calls -max-retries a value:\n%s", help)
	}
}
