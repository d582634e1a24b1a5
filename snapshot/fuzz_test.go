package snapshot

import (
	"encoding/json"
	"net/url"
	"reflect"
	"testing"
)

// FuzzParse: a stored or dropped document never panics the page, and one
// that parses survives a JSON round trip unchanged.
func FuzzParse(f *testing.F) {
	ref, test := pair()
	d, err := Build(nil, Capture{Logits: ref}, Capture{Logits: test}, nil, text)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := json.Marshal(d)
	f.Add(good)
	f.Add([]byte(`{"kind":"logitscope.snapshot","version":1}`))
	f.Add([]byte(`{"kind":"logitscope.snapshot","version":1,"report":{"rows":1,"positions":[]},"tokens":[1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			return
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("a parsed document does not encode: %v", err)
		}
		if _, err := Parse(again); err != nil {
			t.Fatalf("a parsed document does not parse again: %v", err)
		}
	})
}

// FuzzParseQuery: any link parses or errs, and a spec that checks out
// encodes to a link that reads back as the same spec.
func FuzzParseQuery(f *testing.F) {
	f.Add("prompt=hi&max_new=3&stops=1,2&system=")
	f.Add("mode=panel&panel=abc&window=4&device=cpu")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		s, err := ParseQuery(q)
		if err != nil || s.Check() != nil {
			return
		}
		back, err := ParseQuery(s.Query())
		if err != nil {
			t.Fatalf("%q: its own link does not parse: %v", raw, err)
		}
		// Query leaves out the other mode's fields.
		want := s
		if s.Mode == Panel {
			want.Prompt, want.MaxNew, want.System, want.Stops = "", DefaultMaxNew, nil, nil
		} else {
			want.Panel, want.Window = "", DefaultWindow
		}
		if !reflect.DeepEqual(back, want) {
			t.Fatalf("%q: round trip\n got %+v\nwant %+v", raw, back, want)
		}
	})
}
