package sidecar_test

import (
	"fmt"

	"logitscope/internal/format/sidecar"
)

func ExampleParse() {
	n, err := sidecar.Parse([]byte(`{"nature":"trained-demo","about":"a small model trained for the demo","prompt":"Tell me about tides."}`), "demo/logitscope.json")
	fmt.Println(n.Nature, "|", n.About, "|", n.Prompt, "|", err)
	// Output: trained-demo | a small model trained for the demo | Tell me about tides. | <nil>
}
