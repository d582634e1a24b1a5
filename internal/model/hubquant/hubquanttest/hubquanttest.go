// Package hubquanttest writes hub checkpoints (hubquant.Writers) of a
// model directory for tests.
package hubquanttest

import (
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/lookup"
	"logitscope/internal/model/hubquant"
)

// Write writes the checkpoint in model as writer's tool would with opt
// into dir, and returns the format.
func Write(t testing.TB, model, writer string, opt hubquant.Options, dir string) lookup.Format {
	t.Helper()
	f, err := hubquant.Writers[writer](opt)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if err := hubquant.Write(ck, f, dir, nil); err != nil {
		t.Fatal(err)
	}
	return f
}
