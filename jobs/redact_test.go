package jobs_test

import (
	"strings"
	"testing"

	"github.com/fencedq/fencedq/jobs"
)

type card struct {
	Number string `json:"number" fencedq:"sensitive"`
	Brand  string `json:"brand"`
}

type Embedded struct {
	Token string `json:"api_token" fencedq:"sensitive"`
}

type charge struct {
	Embedded
	Amount int               `json:"amount"`
	Card   card              `json:"card"`
	Backup []card            `json:"backup"`
	ByName map[string]card   `json:"by_name"`
	PIN    string            `fencedq:"sensitive"`
	Plain  map[string]string `json:"plain"`
}

func (charge) Kind() string { return "charge" }

func TestRedactJSON(t *testing.T) {
	c := charge{
		Embedded: Embedded{Token: "tok-secret"},
		Amount:   42,
		Card:     card{Number: "4111-secret", Brand: "visa"},
		Backup:   []card{{Number: "5500-secret", Brand: "mc"}},
		ByName:   map[string]card{"x": {Number: "3400-secret"}},
		PIN:      "1234-secret",
		Plain:    map[string]string{"note": "visible"},
	}
	out, err := jobs.RedactJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "secret") {
		t.Fatalf("sensitive value shown: %s", s)
	}
	for _, want := range []string{`"amount":42`, `"brand":"visa"`, `"note":"visible"`, `"PIN":"[redacted]"`, `"api_token":"[redacted]"`} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in %s", want, s)
		}
	}
}

type Credentials struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// whole embeds a struct that is sensitive as a whole: its promoted fields
// must not leak.
type whole struct {
	Credentials `fencedq:"sensitive"`
	Amount      int `json:"amount"`
}

// holder stores structs behind interface-typed fields.
type holder struct {
	Any   any            `json:"any"`
	List  []any          `json:"list"`
	ByKey map[string]any `json:"by_key"`
}

func TestRedactJSONEmbeddedSensitiveStruct(t *testing.T) {
	out, err := jobs.RedactJSON(whole{Credentials: Credentials{User: "alice-secret", Password: "pw-secret"}, Amount: 7})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "secret") {
		t.Fatalf("promoted fields of a sensitive embedded struct shown: %s", out)
	}
	if !strings.Contains(string(out), `"amount":7`) {
		t.Fatalf("non-sensitive field missing: %s", out)
	}
}

func TestRedactJSONInterfaceFields(t *testing.T) {
	h := holder{
		Any:   card{Number: "4111-secret", Brand: "visa"},
		List:  []any{&card{Number: "5500-secret", Brand: "mc"}, "plain"},
		ByKey: map[string]any{"k": charge{PIN: "1234-secret", Amount: 3}},
	}
	out, err := jobs.RedactJSON(h)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if strings.Contains(s, "secret") {
		t.Fatalf("sensitive field behind an interface shown: %s", s)
	}
	for _, want := range []string{`"brand":"visa"`, `"brand":"mc"`, `"plain"`, `"amount":3`} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in %s", want, s)
		}
	}
}

// TestRedactText: every sensitive value RedactJSON hides, nested, behind
// an interface or in a whole sensitive struct, is replaced in a text, the
// longest first and as a JSON payload quotes it too; other values, and
// sensitive ones under 3 bytes, stay.
func TestRedactText(t *testing.T) {
	c := charge{
		Embedded: Embedded{Token: `tok"quoted`},
		Amount:   4242,
		Card:     card{Number: "4111111111111111", Brand: "visa"},
		Backup:   []card{{Number: "41111111", Brand: "mc"}},
		PIN:      "12",
	}
	text := `card 4111111111111111 or 41111111 (visa, mc), amount 4242, pin 12, token tok"quoted in {"api_token":"tok\"quoted"}`
	got := jobs.RedactText(c, text)
	want := `card [redacted] or [redacted] (visa, mc), amount 4242, pin 12, token [redacted] in {"api_token":"[redacted]"}`
	if got != want {
		t.Errorf("RedactText:\n got %s\nwant %s", got, want)
	}
	h := holder{Any: whole{Credentials: Credentials{User: "ada", Password: "hunter2"}, Amount: 4242}}
	if got := jobs.RedactText(h, "ada:hunter2 4242"); got != "[redacted]:[redacted] 4242" {
		t.Errorf("RedactText behind an interface: %s", got)
	}
	if got := jobs.RedactText(card{Brand: "visa"}, "visa"); got != "visa" {
		t.Errorf("RedactText with no sensitive value: %s", got)
	}
}
