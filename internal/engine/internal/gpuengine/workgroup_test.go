package gpuengine

import (
	"strings"
	"testing"
	"time"

	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model"
	"logitscope/shaders"
)

// smallWorkgroups is a real GPU (hardware) whose workgroups hold at most
// max invocations.
type smallWorkgroups struct {
	hardware
	max uint32
}

func (s smallWorkgroups) Info() gpu.Info {
	info := s.hardware.Info()
	info.Limits.MaxComputeInvocationsPerWorkgroup = s.max
	return info
}

// chooseSizes fixes the sizes it is given, takes the default on a
// software adapter, and on a real GPU times every size the device runs
// (the a8 entry points with 8-bit activations) and takes the fastest for
// each of one token and eight; a size that is not a candidate, or more
// than the device runs, is refused by value. (Every size gives the same
// bits: TestMatmul8Kernel, TestA8Matmul.)
func TestChooseSizes(t *testing.T) {
	base := nativetest.Device(t)
	const rows, cols = 96, 256
	data := randomWeights(t, shaders.Q4, rows, cols, 7)
	file, off := ggmlFile(t, data)
	src := pieceSource{pieces: map[string][]Piece{model.NamesOf(0).Wup: {{Rows: rows, Cols: cols, Format: shaders.Q4, File: file, Offset: off, Length: int64(len(data))}}}}
	small := smallWorkgroups{hardware{base}, 64}
	cases := []struct {
		name  string
		dev   gpu.Device
		opt   Options
		acts8 bool
		want  sizes // zero: measured
		err   string
	}{
		{name: "software", dev: base, want: defaultSizes},
		{name: "fixed", dev: hardware{base}, opt: Options{Workgroup: 128}, want: sizes{128, 128}},
		{name: "measured", dev: small},
		{name: "measured a8", dev: small, acts8: true},
		{name: "not a candidate", dev: base, opt: Options{Workgroup: 48}, err: "matmul workgroup size 48: want one of [32 64 128 256]"},
		{name: "more than the device runs", dev: small, opt: Options{Workgroup: 128}, err: "within the device's 64 invocations"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &State{dev: c.dev, pipes: map[string]gpu.Pipeline{}, maxPiece: 1 << 30, acts8: c.acts8}
			tuned, err := e.chooseSizes(c.opt, src)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.want != (sizes{}) {
				if e.wg != c.want || tuned.decode != nil {
					t.Fatalf("sizes %+v (timings %v), want %+v unmeasured", e.wg, tuned, c.want)
				}
				return
			}
			// 32 and 64 timed, 128 and 256 not (the device runs 64).
			for _, ts := range [][]time.Duration{tuned.decode, tuned.prefill} {
				if len(ts) != 4 || ts[0] <= 0 || ts[1] <= 0 || ts[2] != 0 || ts[3] != 0 {
					t.Fatalf("timings %v, want 32 and 64 timed only", ts)
				}
			}
			if e.wg != tuned.best() || (e.wg.decode != 32 && e.wg.decode != 64) || (e.wg.prefill != 32 && e.wg.prefill != 64) {
				t.Fatalf("sizes %+v, timings %v", e.wg, tuned)
			}
		})
	}
}

// best takes each of decode and prefill's fastest measured size, skipping
// the sizes not measured (0).
func TestBestSizes(t *testing.T) {
	for _, c := range []struct {
		t    timings
		want sizes
	}{
		{timings{[]time.Duration{3, 2, 1, 4}, []time.Duration{1, 2, 3, 4}}, sizes{128, 32}},
		{timings{[]time.Duration{0, 5, 0, 0}, []time.Duration{9, 8, 0, 0}}, sizes{64, 64}},
		{timings{[]time.Duration{2, 2, 2, 2}, []time.Duration{0, 0, 0, 7}}, sizes{32, 256}},
	} {
		if got := c.t.best(); got != c.want {
			t.Errorf("best of %v: %+v, want %+v", c.t, got, c.want)
		}
	}
}
