// Fuzz targets and property tests for what a job's args go through before
// anything is written or shown: argtype.IsJSONObject, which decides whether a raw
// payload is acceptable, and RedactJSON, which produces the only form of
// the args that logs, the CLI, the dashboard and metrics ever see.
//
// As ordinary tests (go test ./jobs/) every fuzz target runs its seed
// corpus once. To fuzz one for longer:
//
//	go test -run '^$' -fuzz=FuzzRedactJSONGeneratedTypes -fuzztime=1m ./jobs/
//	go test -run '^$' -fuzz=FuzzRedactJSONPayload -fuzztime=1m ./jobs/
//	go test -run '^$' -fuzz=FuzzIsJSONObject -fuzztime=1m ./jobs/
//	go test -run '^$' -fuzz=FuzzRecordFrom -fuzztime=1m ./jobs/   (fuzz_internal_test.go)
//
// A failing input is saved under testdata/fuzz/<target>/ and replayed by
// every later go test run until it passes.
package jobs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/fencedq/fencedq/internal/argtype"
	"github.com/fencedq/fencedq/jobs"
)

// secretBox holds a sensitive field but encodes itself: RedactJSON cannot
// follow its shape, so the whole value must be hidden.
type secretBox struct {
	Secret string `fencedq:"sensitive"`
	Note   string
}

func (b secretBox) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"box": b.Secret + "|" + b.Note})
}

// plainBox encodes itself and holds nothing sensitive: it is shown as is.
type plainBox struct{ Note string }

func (b *plainBox) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"note": b.Note})
}

// shape is one node of a generated args type.
type shape struct {
	kind   string // str, int, struct, ptr, slice, map, iface, secretBox, plainBox
	elem   *shape
	fields []fieldShape
	typ    reflect.Type
}

type fieldShape struct {
	sensitive bool
	hidden    bool // json:"-": never encoded
	shape     *shape
}

// argGen builds random nested args types with reflect.StructOf and fills
// them with unique markers, recording which markers are sensitive (must
// never be shown) and which are plain (must still be shown).
type argGen struct {
	r       *rand.Rand
	n       int
	secrets []string
	plain   []string
}

func (g *argGen) next() int { g.n++; return g.n }

var anyType = reflect.TypeFor[any]()

func (g *argGen) shape(depth int) *shape {
	kinds := []string{"str", "int", "str", "int", "secretBox", "plainBox"}
	if depth < 4 {
		kinds = append(kinds, "struct", "struct", "struct", "ptr", "slice", "map", "iface")
	}
	s := &shape{kind: kinds[g.r.IntN(len(kinds))]}
	switch s.kind {
	case "str":
		s.typ = reflect.TypeFor[string]()
	case "int":
		s.typ = reflect.TypeFor[int64]()
	case "secretBox":
		s.typ = reflect.TypeFor[secretBox]()
	case "plainBox":
		s.typ = reflect.TypeFor[*plainBox]()
	case "ptr":
		s.elem = g.shape(depth + 1)
		s.typ = reflect.PointerTo(s.elem.typ)
	case "slice":
		s.elem = g.shape(depth + 1)
		s.typ = reflect.SliceOf(s.elem.typ)
	case "map":
		s.elem = g.shape(depth + 1)
		s.typ = reflect.MapOf(reflect.TypeFor[string](), s.elem.typ)
	case "iface":
		s.elem = g.shape(depth + 1) // the dynamic type of the values
		s.typ = anyType
	case "struct":
		var sfs []reflect.StructField
		for range 1 + g.r.IntN(4) {
			fs := fieldShape{shape: g.shape(depth + 1), sensitive: g.r.IntN(4) == 0}
			n := g.next()
			sf := reflect.StructField{Name: fmt.Sprintf("F%d", n), Type: fs.shape.typ}
			var tag []string
			switch g.r.IntN(7) {
			case 0:
				tag = append(tag, fmt.Sprintf(`json:"j%d"`, n))
			case 1:
				tag = append(tag, fmt.Sprintf(`json:"j%d,omitempty"`, n))
			case 2:
				tag = append(tag, `json:",omitempty"`)
			case 3:
				tag = append(tag, `json:"-"`)
				fs.hidden = true
			case 4:
				tag = append(tag, fmt.Sprintf(`json:"-%d,"`, n)) // a name starting with "-"
			}
			if fs.shape.kind == "int" && g.r.IntN(4) == 0 && !fs.hidden {
				if len(tag) == 0 {
					tag = append(tag, `json:",string"`)
				} else {
					tag[0] = strings.TrimSuffix(tag[0], `"`) + `,string"`
				}
			}
			if fs.sensitive {
				tag = append(tag, `fencedq:"sensitive"`)
			}
			sf.Tag = reflect.StructTag(strings.Join(tag, " "))
			// Embed a struct (or a pointer to one) now and then: its fields
			// are promoted unless the tag names it.
			if k := fs.shape.kind; (k == "struct" || (k == "ptr" && fs.shape.elem.kind == "struct")) && g.r.IntN(3) == 0 {
				sf.Anonymous = true
			}
			s.fields = append(s.fields, fs)
			sfs = append(sfs, sf)
		}
		s.typ = reflect.StructOf(sfs)
	}
	return s
}

// fill returns a value of s.typ; markers under a sensitive field are
// secret, markers under json:"-" are not shown at all, the rest are plain.
func (g *argGen) fill(s *shape, sensitive, hidden bool) reflect.Value {
	record := func(m string, overRedacted bool) {
		switch {
		case hidden:
		case sensitive:
			g.secrets = append(g.secrets, m)
		case !overRedacted:
			g.plain = append(g.plain, m)
		}
	}
	switch s.kind {
	case "str":
		m := fmt.Sprintf("mk%06d_", g.next())
		record(m, false)
		return reflect.ValueOf(m)
	case "int":
		v := int64(4_000_000_000_000_000_000 + g.next()) // beyond float64 precision
		record(strconv.FormatInt(v, 10), false)
		return reflect.ValueOf(v)
	case "secretBox":
		b := secretBox{Secret: fmt.Sprintf("mk%06d_", g.next()), Note: fmt.Sprintf("mk%06d_", g.next())}
		if !hidden {
			g.secrets = append(g.secrets, b.Secret) // sensitive whatever its parent
		}
		record(b.Note, true) // hidden with the box: not required to show
		return reflect.ValueOf(b)
	case "plainBox":
		b := &plainBox{Note: fmt.Sprintf("mk%06d_", g.next())}
		record(b.Note, false)
		return reflect.ValueOf(b)
	case "ptr":
		p := reflect.New(s.elem.typ)
		p.Elem().Set(g.fill(s.elem, sensitive, hidden))
		return p
	case "slice":
		n := 1 + g.r.IntN(2)
		v := reflect.MakeSlice(s.typ, n, n)
		for i := range n {
			v.Index(i).Set(g.fill(s.elem, sensitive, hidden))
		}
		return v
	case "map":
		v := reflect.MakeMap(s.typ)
		for range 1 + g.r.IntN(2) {
			v.SetMapIndex(reflect.ValueOf(fmt.Sprintf("key%d", g.next())), g.fill(s.elem, sensitive, hidden))
		}
		return v
	case "iface":
		v := reflect.New(anyType).Elem()
		v.Set(g.fill(s.elem, sensitive, hidden))
		return v
	case "struct":
		v := reflect.New(s.typ).Elem()
		for i, f := range s.fields {
			v.Field(i).Set(g.fill(f.shape, sensitive || f.sensitive, hidden || f.hidden))
		}
		return v
	}
	panic("unknown shape " + s.kind)
}

// checkGenerated builds one random args type from seed and checks
// RedactJSON against it.
func checkGenerated(t *testing.T, seed uint64) {
	t.Helper()
	g := &argGen{r: rand.New(rand.NewPCG(seed, 0x5eed))}
	var s *shape
	for s == nil || s.kind != "struct" {
		s = g.shape(0)
	}
	v := g.fill(s, false, false)
	args := v.Interface()
	if g.r.IntN(2) == 0 { // a pointer to the args, as well as the value
		p := reflect.New(s.typ)
		p.Elem().Set(v)
		args = p.Interface()
	}
	out, err := jobs.RedactJSON(args)
	if err != nil {
		t.Fatalf("seed %d: RedactJSON(%s): %v", seed, s.typ, err)
	}
	if !json.Valid(out) {
		t.Fatalf("seed %d: RedactJSON output is not JSON: %s", seed, out)
	}
	for _, m := range g.secrets {
		if bytes.Contains(out, []byte(m)) {
			t.Fatalf("seed %d: sensitive value %s shown\ntype %s\noutput %s", seed, m, s.typ, out)
		}
	}
	for _, m := range g.plain {
		if !bytes.Contains(out, []byte(m)) {
			raw, _ := json.Marshal(args)
			t.Fatalf("seed %d: plain value %s lost\ntype %s\nencoded %s\noutput  %s", seed, m, s.typ, raw, out)
		}
	}
}

// TestRedactJSONGeneratedTypes is the property over many generated args
// types: no sensitive value is ever shown, every other value still is.
func TestRedactJSONGeneratedTypes(t *testing.T) {
	n := uint64(3000)
	if testing.Short() {
		n = 300
	}
	for seed := range n {
		checkGenerated(t, seed)
	}
}

func FuzzRedactJSONGeneratedTypes(f *testing.F) {
	for _, seed := range []uint64{0, 1, 42, 1 << 40, 0xdeadbeef} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) { checkGenerated(t, seed) })
}

// fuzzArgs has sensitive fields at the top, nested, embedded and behind
// interfaces; FuzzRedactJSONPayload decodes arbitrary payloads into it.
type fuzzArgs struct {
	Credentials `fencedq:"sensitive"`
	Secret      string         `json:"secret" fencedq:"sensitive"`
	Card        *card          `json:"card"`
	Cards       []card         `json:"cards"`
	Any         any            `json:"any"`
	Extra       map[string]any `json:"extra"`
	Number      json.Number    `json:"number"`
}

var payloadSeeds = []string{
	`{}`,
	`{"a":1}`,
	`{"secret":"s3cr3t","card":{"number":"4111","brand":"visa"},"user":"u","password":"p"}`,
	`{"cards":[{"number":"1"},{"number":"2","brand":"x"}],"any":{"number":"9"},"extra":{"k":[1,2,{"x":null}]}}`,
	`{"number":12345678901234567890123,"any":[1,"2",true,null]}`,
	`{"secret":null,"card":null,"cards":null}`,
	`{"a":{"b":{"c":{"d":{"e":[[[[[]]]]]}}}}}`,
	`{"\u003cscript\u003e":"\u2028","dup":1,"dup":2}`,
	`[]`, `null`, `"x"`, `1`, `{`, `{"a":}`, ``, "{\"a\":\"\xff\"}",
}

func FuzzIsJSONObject(f *testing.F) {
	for _, s := range payloadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		got := argtype.IsJSONObject(payload)
		var m map[string]any
		want := json.Unmarshal(payload, &m) == nil && m != nil
		if got != want {
			t.Fatalf("IsJSONObject(%q) = %v, want %v", payload, got, want)
		}
	})
}

func FuzzRedactJSONPayload(f *testing.F) {
	for _, s := range payloadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		if !argtype.IsJSONObject(payload) {
			return
		}
		// A plain map has nothing sensitive: shown unchanged (as JSON).
		var m map[string]any
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatalf("IsJSONObject accepted %q that does not decode: %v", payload, err)
		}
		out, err := jobs.RedactJSON(m)
		if err != nil {
			t.Fatalf("RedactJSON(map from %q): %v", payload, err)
		}
		want, _ := json.Marshal(m)
		var a, b any
		if json.Unmarshal(out, &a) != nil || json.Unmarshal(want, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("a map without sensitive fields changed:\n got %s\nwant %s", out, want)
		}
		// The same payload decoded into typed args: sensitive members are hidden.
		var args fuzzArgs
		if json.Unmarshal(payload, &args) != nil {
			return
		}
		out, err = jobs.RedactJSON(args)
		if err != nil {
			t.Fatalf("RedactJSON(%+v): %v", args, err)
		}
		var shown map[string]any
		if err := json.Unmarshal(out, &shown); err != nil {
			t.Fatalf("RedactJSON output is not an object: %s", out)
		}
		for _, k := range []string{"secret", "user", "password"} {
			if v, ok := shown[k]; ok && v != jobs.Redacted {
				t.Fatalf("sensitive member %q shown as %v in %s", k, v, out)
			}
		}
		var cards []any
		if c, ok := shown["card"].(map[string]any); ok {
			cards = append(cards, c)
		}
		if cs, ok := shown["cards"].([]any); ok {
			cards = append(cards, cs...)
		}
		for _, c := range cards {
			if n, ok := c.(map[string]any)["number"]; ok && n != jobs.Redacted {
				t.Fatalf("card number shown as %v in %s", n, out)
			}
		}
	})
}
