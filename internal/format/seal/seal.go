// Package seal makes JSON documents tamper-evident: a document's seal is
// the sha256 of its canonical JSON (keys sorted, no insignificant
// whitespace, numbers as written) without the seal field itself. Variant
// manifests and capture receipts are sealed this way.
package seal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Canonical re-encodes JSON with sorted object keys and no whitespace.
// Numbers keep their text, so 64-bit sizes survive unchanged.
func Canonical(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON document")
	}
	return encode(v)
}

func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // canonical means the plain characters
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Sum is the seal of a JSON document: the sha256 (hex) of its canonical
// form with the top-level field named field removed.
func Sum(data []byte, field string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return "", err
	}
	if obj == nil {
		return "", fmt.Errorf("not a JSON object")
	}
	delete(obj, field)
	canon, err := encode(obj)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(canon)
	return hex.EncodeToString(h[:]), nil
}

// Marshal encodes v (a struct whose field tagged field holds the seal)
// with the seal filled in, indented for people; set is called with the
// seal so that v's own field is updated too.
func Marshal(v any, field string, set func(string)) ([]byte, error) {
	set("")
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sum, err := Sum(data, field)
	if err != nil {
		return nil, err
	}
	set(sum)
	out, err := json.MarshalIndent(v, "", "  ")
	return append(out, '\n'), err
}

// Verify checks that data's field holds the seal of the rest of data.
// name is used in the error.
func Verify(data []byte, field, name string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	var stored string
	if raw, ok := obj[field]; !ok || json.Unmarshal(raw, &stored) != nil || stored == "" {
		return fmt.Errorf("%s: not sealed (no %s field)", name, field)
	}
	sum, err := Sum(data, field)
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	if sum != stored {
		return fmt.Errorf("%s: %s is %s but the content hashes to %s: the file was modified after it was sealed", name, field, stored, sum)
	}
	return nil
}
