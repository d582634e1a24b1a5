package snapshot

import (
	"bytes"
	"encoding/json"
	"net/url"
	"reflect"
	"testing"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/routing"
)

// FuzzParse: a stored or dropped document never panics the page, one that
// parses survives a JSON round trip unchanged, and no class that parses is
// outside margins' three (the strip writes it into a class attribute).
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
	for _, hostile := range [][2]string{
		{`"class":"agree"`, `"class":"agree\"><img src=x onerror=alert(1)>"`},
		{`"class":"agree"`, `"class":"clear","class":"agree"`},
		{`"kind":"logitscope.snapshot"`, `"kind":"logitscope.snapshot","\u006bind":"x"`},
		{`"tokens":[0,0,0]`, `"tokens":[0,-1,1e3]`},
		{`"texts":{`, `"texts":{"0":"<script>alert(1)</script>","01":"x",`},
		{`"rows":3`, `"rows":2`},
		{`"margin_of":"runner_up"`, `"margin_of":"<b>"`},
		{`"mode":"sigma"`, `"mode":"\u003cb\u003e"`},
	} {
		f.Add(bytes.Replace(good, []byte(hostile[0]), []byte(hostile[1]), 1))
	}
	f.Add(append(good, " {}"...))
	// A mixture of experts' document: its routing, and a change that its
	// experts contradict.
	mref, mtest := moePair()
	md, err := Build(nil, Capture{Logits: mref}, Capture{Logits: mtest}, nil, text)
	if err != nil {
		f.Fatal(err)
	}
	moe, _ := json.Marshal(md)
	f.Add(moe)
	f.Add(bytes.Replace(moe, []byte(`"change":"set"`), []byte(`"change":"same"`), 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			return
		}
		for i, p := range d.Report.Positions {
			if p.Class != margins.Agree && p.Class != margins.Close && p.Class != margins.Clear {
				t.Fatalf("position %d: class %q parsed", i, p.Class)
			}
		}
		if rt := d.Report.Routing; rt != nil {
			for i, p := range rt.Positions {
				if p.Change != routing.Same && p.Change != routing.Order && p.Change != routing.Set {
					t.Fatalf("routing position %d: change %q parsed", i, p.Change)
				}
			}
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
			want.Prompt, want.MaxNew, want.System, want.Stops = "", DefaultMaxNew, "", nil
		} else {
			want.Panel, want.Window = "", DefaultWindow
		}
		if !reflect.DeepEqual(back, want) {
			t.Fatalf("%q: round trip\n got %+v\nwant %+v", raw, back, want)
		}
	})
}
