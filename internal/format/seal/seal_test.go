package seal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"b": 1, "a": [ 2, {"z": null, "y": "<&>"} ]}`, `{"a":[2,{"y":"<&>","z":null}],"b":1}`},
		{`{"size": 18446744073709551615, "f": 1.50}`, `{"f":1.50,"size":18446744073709551615}`},
		{`"é\u00e9"`, `"éé"`},
	}
	for _, c := range cases {
		got, err := Canonical([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("Canonical(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := Canonical([]byte(`{} {}`)); err == nil {
		t.Error("trailing document accepted")
	}
}

type doc struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	Seal string `json:"seal"`
}

func TestMarshalVerify(t *testing.T) {
	d := doc{Name: "shard-00001.bin", Size: 5}
	data, err := Marshal(&d, "seal", func(s string) { d.Seal = s })
	if err != nil {
		t.Fatal(err)
	}
	// The seal is the sha256 of the canonical document without it,
	// computed here by hand.
	want := sha256.Sum256([]byte(`{"name":"shard-00001.bin","size":5}`))
	if d.Seal != hex.EncodeToString(want[:]) || !strings.Contains(string(data), d.Seal) {
		t.Fatalf("seal %s, want %x", d.Seal, want)
	}
	if err := Verify(data, "seal", "m.json"); err != nil {
		t.Fatal(err)
	}
	forged := strings.Replace(string(data), `"size": 5`, `"size": 6`, 1)
	if err := Verify([]byte(forged), "seal", "m.json"); err == nil || !strings.Contains(err.Error(), "m.json: seal is") {
		t.Fatalf("forged document: %v", err)
	}
	if err := Verify([]byte(`{"name":"x"}`), "seal", "m.json"); err == nil || !strings.Contains(err.Error(), "not sealed (no seal field)") {
		t.Fatalf("unsealed document: %v", err)
	}
}

func ExampleSum() {
	s, _ := Sum([]byte(`{"b": 2, "a": 1, "seal": "old"}`), "seal")
	fmt.Println(s[:16])
	// Output: 43258cff783fe703
}
