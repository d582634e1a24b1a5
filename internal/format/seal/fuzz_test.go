package seal

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// decode reads a JSON document keeping numbers' text, as Canonical does.
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// Canonical is idempotent and keeps the document's meaning.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b": 1, "a": [ 2, {"z": null, "y": "<&>"} ]}`, `{"size": 18446744073709551615, "f": 1.50}`,
		`"é\u00e9"`, `{} {}`, `[`, `{"a":1,"a":2}`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Canonical(data)
		if err != nil {
			return
		}
		again, err := Canonical(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("Canonical(%q) = %q, whose canonical form is %q (%v)", data, c, again, err)
		}
		v1, _ := decode(data)
		v2, err := decode(c)
		if err != nil || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("Canonical(%q) = %q changed the document (%v)", data, c, err)
		}
	})
}

// Sealing then verifying round-trips, and a changed byte passes Verify only
// when it leaves the document's meaning unchanged (whitespace, the case of
// a \u escape's hex digits).
func FuzzSealVerify(f *testing.F) {
	f.Add([]byte(`{"name":"shard-00001.bin","size":5}`), uint(10), byte('6'))
	f.Add([]byte(`{"a":[1,2,{"b":"c"}],"n":1.50}`), uint(3), byte(' '))
	f.Add([]byte(`{"seal":"x","k":"\u00e9"}`), uint(14), byte('E'))
	f.Add([]byte(`[1]`), uint(0), byte('{'))
	f.Fuzz(func(t *testing.T, doc []byte, at uint, b byte) {
		var obj map[string]json.RawMessage
		if json.Unmarshal(doc, &obj) != nil || obj == nil {
			if err := Verify(doc, "seal", "fuzz.json"); err == nil {
				t.Fatalf("Verify accepted %q, which is not a JSON object", doc)
			}
			return
		}
		sum, err := Sum(doc, "seal")
		if err != nil {
			t.Fatalf("Sum of a JSON object: %v", err)
		}
		obj["seal"], _ = json.Marshal(sum)
		sealed, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(sealed, "seal", "fuzz.json"); err != nil {
			t.Fatalf("a freshly sealed document fails: %v", err)
		}
		mutated := bytes.Clone(sealed)
		i := int(at % uint(len(mutated)))
		if mutated[i] == b {
			return
		}
		mutated[i] = b
		if Verify(mutated, "seal", "fuzz.json") != nil {
			return
		}
		v1, _ := decode(sealed)
		v2, err := decode(mutated)
		if err != nil || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("byte %d of %q changed to %q and still verifies", i, sealed, b)
		}
	})
}
