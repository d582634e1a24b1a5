package variant

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/synthtest"
	"logitscope/internal/quant"
)

// An experts-only variant of a mixture of experts proves that every
// tensor outside the routed experts is the checkpoint's (its BF16 values
// widened to float32, byte range by byte range), and the proof no longer
// holds, naming the tensor, once a kept byte changes on either side.
func TestUntouchedExpertsOnly(t *testing.T) {
	ck := synthtest.Checkpoint(t, synth.Presets["tiny-qwen3-moe"], 0)
	dir := filepath.Join(t.TempDir(), "q4")
	experts := regexp.MustCompile(`mlp\.experts\.`)
	if err := Write(ck, quant.Q4, dir, Options{Policy: &Policy{Only: experts.String()}, MaxShardBytes: 16 << 10}); err != nil {
		t.Fatal(err)
	}
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := Untouched(ck, v, "contract-seal")
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, k := range u.Tensors {
		kept[k.Name] = true
		if experts.MatchString(k.Name) {
			t.Errorf("%s: an expert is listed as kept", k.Name)
		}
		if k.Official.DType != "BF16" || k.Official.Length*2 != k.Loaded.Length || k.Official.F32SHA256 != k.Loaded.SHA256 {
			t.Errorf("%s: official %+v, loaded %+v", k.Name, k.Official, k.Loaded)
		}
	}
	for _, name := range ck.Names() {
		if kept[name] == experts.MatchString(name) {
			t.Errorf("%s: kept %v, expert %v: every tensor is either replaced or proved untouched", name, kept[name], experts.MatchString(name))
		}
	}
	if n := v.Replaced()["q4"]; n == 0 || n+len(kept) != len(ck.Names()) {
		t.Errorf("%d tensors replaced, %d kept, of %d", n, len(kept), len(ck.Names()))
	}
	if err := CheckUntouched(ck, v, u); err != nil {
		t.Fatalf("the proof against the same files: %v", err)
	}

	// A byte of a kept tensor in the checkpoint's shard: the recomputed
	// proof's official hash differs, and the variant's kept values are
	// no longer the checkpoint's.
	victim := u.Tensors[len(u.Tensors)/2]
	shard := filepath.Join(ck.Dir, victim.Official.Shard)
	b, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	b[victim.Official.Offset] ^= 0x40
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = CheckUntouched(ck, v, u)
	want := "untouched: tensor " + victim.Name
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "keeps values that are not") {
		t.Fatalf("error %v; want one naming %q", err, want)
	}
}
