package host

import (
	"context"

	"logitscope/gpu"
)

// state is what the gpu imports serve one instance with. wazero calls a
// host function with the context of the export that the host called, so
// the state rides in it and one gpu host module serves every instance.
type state struct {
	dev      gpu.Device
	modelDir string // mounted at Mount
	lastErr  string
}

type stateKey struct{}

func withState(ctx context.Context, st *state) context.Context {
	return context.WithValue(ctx, stateKey{}, st)
}

func stateOf(ctx context.Context) *state {
	st, _ := ctx.Value(stateKey{}).(*state)
	return st
}
