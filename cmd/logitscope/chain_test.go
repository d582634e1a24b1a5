package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/logitdir"
	"logitscope/internal/format/receipt"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/format/seal"
	"logitscope/internal/model/synth"
)

func verifyCmd(args []string, out, errb *bytes.Buffer) error { return verifyCommand(args, out, errb) }
func inventoryCmd(args []string, out, errb *bytes.Buffer) error {
	return inventoryCommand(args, out, errb)
}
func panelCmd(args []string, out, errb *bytes.Buffer) error { return panelCommand(args, out, errb) }

// provenance is a capture of tiny-qwen3-moe's experts-only q4 variant (its
// weights behind an index) over a sealed .jsonl panel whose windows are
// padded left and right, with domains and roles: the files a chain binds.
type provenance struct {
	root, model, panel string
	f32, q4, dump      string // windowed captures, and a dump of the q4 side
}

// panelLines are six windows of 20 tokens, padded left or right by up to
// 5, in three domains and two roles.
func panelLines() string {
	var b strings.Builder
	for i := range 6 {
		ids := make([]int, 20)
		mask := make([]int, 20)
		pad := []int{0, 3, 0, 5, 2, 1}[i]
		for j := range ids {
			ids[j] = 1 + (37*i+11*j)%400
			left := i%2 == 1
			if left && j >= pad || !left && j < 20-pad {
				mask[j] = 1
			}
		}
		line, _ := json.Marshal(map[string]any{"input_ids": ids, "attention_mask": mask, "window_id": fmt.Sprintf("w%d", i),
			"document_id": fmt.Sprintf("doc%d", i/2), "domain": []string{"code", "prose", "math"}[i%3], "role": []string{"eval", "calibration"}[i%2]})
		b.Write(append(line, '\n'))
	}
	return b.String()
}

func newProvenance(t *testing.T) provenance {
	t.Helper()
	root := t.TempDir()
	p := provenance{root: root, model: filepath.Join(root, "model"), panel: filepath.Join(root, "panel.jsonl"),
		f32: filepath.Join(root, "f32"), q4: filepath.Join(root, "q4"), dump: filepath.Join(root, "q4.safetensors")}
	if err := synth.Write(synth.Presets["tiny-qwen3-moe"], p.model, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	// An index beside the one shard, as a sharded checkpoint has.
	st, err := safetensors.Open(filepath.Join(p.model, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	wm := map[string]string{}
	for _, n := range st.Names() {
		wm[n] = "model.safetensors"
	}
	st.Close()
	index, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": wm})
	must(t, os.WriteFile(filepath.Join(p.model, "model.safetensors.index.json"), index, 0o644))
	if _, err := run(t, quantizeCmd, "--model", p.model, "--scheme", "q4", "--only", `mlp\.experts\.`); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(p.panel, []byte(panelLines()), 0o644))
	if _, err := run(t, panelCmd, p.panel); err != nil {
		t.Fatal(err)
	}
	base := []string{"--model", p.model, "--device", "cpu", "--runtime", "native", "--panel", p.panel}
	for _, c := range [][]string{{"--variant", "f32", "--out", p.f32}, {"--variant", "q4", "--out", p.q4}, {"--variant", "q4", "--dump-logits", p.dump}} {
		if _, err := run(t, captureCmd, append(base, c...)...); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A capture's dry run prints every identity its receipt then carries,
// seal for seal, and writes nothing; the capture verifies against the
// files it names; its report breaks the statistics down by the panel's
// domains and roles, the same from the windowed capture and the dump.
func TestChainCapture(t *testing.T) {
	p := newProvenance(t)
	plan, err := run(t, captureCmd, "--model", p.model, "--device", "cpu", "--runtime", "native", "--panel", p.panel, "--variant", "q4", "--out", filepath.Join(p.root, "planned"), "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	var planned struct{ Chain chain.Chain }
	must(t, json.Unmarshal([]byte(plan), &planned))
	if _, err := os.Stat(filepath.Join(p.root, "planned")); err == nil {
		t.Error("the dry run made its --out directory")
	}
	r, err := logitdir.ReadReceipt(p.q4)
	must(t, err)
	got, want := r.Chain, planned.Chain
	for _, l := range []struct{ name, plan, ran string }{
		{"inventory", want.Inventory.Seal, got.Inventory.Seal},
		{"contract", want.Contract.Seal, got.Contract.Seal},
		{"checkpoint", want.Checkpoint.Seal, got.Checkpoint.Seal},
		{"untouched", want.Untouched.Seal, got.Untouched.Seal},
		{"backend", want.Backend.Seal, got.Backend.Seal},
		{"panel", want.Panel.Seal, got.Panel.Seal},
	} {
		if l.plan != l.ran || l.plan == "" {
			t.Errorf("%s: the plan's seal %q, the capture's %q", l.name, l.plan, l.ran)
		}
	}
	if r.PanelReceipt != got.Panel.Seal || r.Backend != got.Backend.Seal || got.Contract.Policy == "" || got.Contract.Replaced["q4"] == 0 || len(got.Untouched.Tensors) == 0 {
		t.Errorf("receipt %+v, contract %+v", r, got.Contract)
	}
	d, err := receipt.Read(receipt.Path(p.dump))
	must(t, err)
	if d.Chain == nil || d.Chain.Checkpoint.Seal != got.Checkpoint.Seal || d.Request.PanelReceipt != got.Panel.Seal {
		t.Errorf("the dump's receipt has chain %+v", d.Chain)
	}
	for _, capture := range []string{p.q4, p.dump} {
		out, err := run(t, verifyCmd, "--model", p.model, "--panel", p.panel, capture)
		if err != nil || !strings.Contains(out, "untouched: 21 pieces kept in float32") || !strings.HasSuffix(out, "verified\n") {
			t.Fatalf("verify %s: %v\n%s", capture, err, out)
		}
	}
	windowed, err := run(t, reportCmd, "--ref", p.f32, "--test", p.q4)
	must(t, err)
	if want := "test chain: checkpoint " + got.Checkpoint.Seal[:12] + "… (1 shards), q4 (q4: 48 tensors in q4, --only \"mlp\\\\.experts\\\\.\"), 21 kept pieces proved the checkpoint's, native cpu, links verified\n"; !strings.Contains(windowed, want) {
		t.Errorf("the report's header has no line\n%s:\n%s", want, windowed)
	}
	_, byDomain, ok := strings.Cut(windowed, "====== By domain ======")
	if !ok || !strings.Contains(byDomain, "====== By role ======") || !strings.Contains(byDomain, "calibration") {
		t.Fatalf("no breakdown:\n%s", windowed)
	}
	// The f32 dump is made here: the breakdown of two dumps is the
	// windowed captures'.
	f32dump := filepath.Join(p.root, "f32.safetensors")
	if _, err := run(t, captureCmd, "--model", p.model, "--device", "cpu", "--runtime", "native", "--panel", p.panel, "--dump-logits", f32dump); err != nil {
		t.Fatal(err)
	}
	dumps, err := run(t, reportCmd, "--ref", f32dump, "--test", p.dump)
	must(t, err)
	if _, b, _ := strings.Cut(dumps, "====== By domain ======"); b != byDomain {
		t.Fatalf("the dumps' breakdown:\n%s\nthe windowed captures':\n%s", b, byDomain)
	}
}

// Each change along the chain is refused, naming the link (or the
// window) it broke: by verify against the files, by report from the
// receipt alone, by capture before it runs.
func TestChainTamper(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, p provenance)
		cmd    string // verify, report, capture
		want   string
	}{
		{"a shard byte", func(t *testing.T, p provenance) { flipByte(t, filepath.Join(p.model, "model.safetensors"), -1) }, "verify",
			"inventory: shard model.safetensors: sha256 "},
		{"the config", func(t *testing.T, p provenance) { appendTo(t, filepath.Join(p.model, "config.json"), "\n") }, "verify",
			"inventory: config config.json: sha256 "},
		{"the index", func(t *testing.T, p provenance) {
			appendTo(t, filepath.Join(p.model, "model.safetensors.index.json"), "\n")
		}, "verify",
			"inventory: index model.safetensors.index.json: sha256 "},
		{"the config before a run", func(t *testing.T, p provenance) { appendTo(t, filepath.Join(p.model, "config.json"), "\n") }, "capture",
			"inventory: config config.json: sha256 "},
		{"the index before a run", func(t *testing.T, p provenance) {
			appendTo(t, filepath.Join(p.model, "model.safetensors.index.json"), " ")
		}, "capture",
			"inventory: index model.safetensors.index.json: sha256 "},
		{"a variant shard byte", func(t *testing.T, p provenance) {
			flipByte(t, filepath.Join(p.model, "variants/q4/shard-00001.bin"), 100)
		}, "verify",
			"contract: "},
		{"a kept tensor with its manifest resealed", func(t *testing.T, p provenance) {
			// Another variant under the same name: a float32 tensor's bytes
			// changed, the shard's sha256 and the manifest's seal made to
			// match. The variant opens; its proof does not hold.
			manifest := filepath.Join(p.model, "variants/q4/manifest.json")
			shard, off := piece(t, manifest, "f32")
			flipByte(t, shard, off)
			reseal(t, manifest, shard)
		}, "verify", "untouched: tensor lm_head.weight rows [0, 512): loaded shard-00001.bin"},
		{"an expert with its manifest resealed", func(t *testing.T, p provenance) {
			manifest := filepath.Join(p.model, "variants/q4/manifest.json")
			shard, off := piece(t, manifest, "q4")
			flipByte(t, shard, off)
			reseal(t, manifest, shard)
		}, "verify", "contract: manifest_sha256 "},
		{"a window's mask", func(t *testing.T, p provenance) {
			os.Remove(chain.PanelPath(p.panel)) // else the panel's own receipt refuses it first
			edit(t, p.panel, `"attention_mask":[0,0,0,1,1,1`, `"attention_mask":[0,0,1,1,1,1`)
		}, "verify", "panel: window w1: attention_mask_sha256 "},
		{"a window's tokens", func(t *testing.T, p provenance) {
			os.Remove(chain.PanelPath(p.panel))
			edit(t, p.panel, `"input_ids":[1,`, `"input_ids":[2,`)
		}, "verify", "panel: window w0: token_ids_sha256 "},
		{"a window's tokens with its receipt beside it", func(t *testing.T, p provenance) { edit(t, p.panel, `"input_ids":[1,`, `"input_ids":[2,`) }, "capture",
			"panel: window w0: token_ids_sha256 "},
		{"the receipt's backend", func(t *testing.T, p provenance) {
			edit(t, filepath.Join(p.q4, logitdir.ReceiptName), `"runtime": "native"`, `"runtime": "wasm"`)
		}, "report", "backend: seal "},
		{"the receipt's inventory", func(t *testing.T, p provenance) {
			edit(t, filepath.Join(p.q4, logitdir.ReceiptName), `"name": "config.json"`, `"name": "config.jsn"`)
		}, "report", "inventory: seal "},
		{"the receipt's contract", func(t *testing.T, p provenance) {
			edit(t, filepath.Join(p.q4, logitdir.ReceiptName), `"scheme": "q4"`, `"scheme": "q8"`)
		}, "report", "contract: seal "},
		{"the receipt's untouched proof", func(t *testing.T, p provenance) {
			edit(t, filepath.Join(p.q4, logitdir.ReceiptName), `"dtype": "BF16"`, `"dtype": "F16"`)
		}, "report", "untouched: seal "},
		{"the receipt's window domain", func(t *testing.T, p provenance) {
			edit(t, filepath.Join(p.q4, logitdir.ReceiptName), `"domain": "prose",
      "role"`, `"domain": "code",
      "role"`)
		}, "report", "window w1: domain "},
		{"the receipt's own field", func(t *testing.T, p provenance) {
			edit(t, filepath.Join(p.q4, logitdir.ReceiptName), `"vocab": 512,
  "logit_files"`, `"vocab": 513,
  "logit_files"`)
		}, "report", "capture-receipt.json: seal is "},
		{"a window file", func(t *testing.T, p provenance) { flipByte(t, filepath.Join(p.q4, logitdir.WindowPath(2)), -1) }, "report",
			"window-0002.safetensors: "},
		{"the dump receipt's checkpoint", func(t *testing.T, p provenance) {
			edit(t, receipt.Path(p.dump), `"vocab": 512,
      "seal"`, `"vocab": 513,
      "seal"`)
		}, "verify-dump", "checkpoint: seal "},
	}
	base := newProvenance(t)
	for _, tc := range tests {
		if strings.Contains(tc.name, ",") {
			t.Fatalf("%q: a comma in a test's name is one in its temporary paths, which report and verify split as DIR,DIR", tc.name)
		}
		t.Run(tc.name, func(t *testing.T) {
			p := base.copy(t)
			inv, err := run(t, inventoryCmd, "--model", p.model)
			must(t, err)
			invPath := filepath.Join(p.root, "inventory.json")
			must(t, os.WriteFile(invPath, []byte(inv), 0o644))
			tc.damage(t, p)
			switch tc.cmd {
			case "verify":
				_, err = run(t, verifyCmd, "--model", p.model, "--panel", p.panel, p.q4)
			case "verify-dump":
				_, err = run(t, verifyCmd, "--model", p.model, p.dump)
			case "report":
				_, err = run(t, reportCmd, "--ref", p.f32, "--test", p.q4)
			case "capture":
				_, err = run(t, captureCmd, "--model", p.model, "--device", "cpu", "--runtime", "native", "--panel", p.panel,
					"--variant", "q4", "--inventory", invPath, "--out", filepath.Join(p.root, "again"))
				if _, serr := os.Stat(filepath.Join(p.root, "again")); serr == nil {
					t.Error("a refused capture made its directory")
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}

// copy is a fresh copy of p's files, for a test to damage.
func (p provenance) copy(t *testing.T) provenance {
	t.Helper()
	root := t.TempDir()
	must(t, os.CopyFS(root, os.DirFS(p.root)))
	q := p
	for _, s := range []*string{&q.model, &q.panel, &q.f32, &q.q4, &q.dump} {
		rel, _ := filepath.Rel(p.root, *s)
		*s = filepath.Join(root, rel)
	}
	q.root = root
	return q
}

// flipByte flips a bit of path's byte at off (from the end when
// negative).
func flipByte(t *testing.T, path string, off int) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	if off < 0 {
		off += len(b)
	}
	b[off] ^= 0x10
	must(t, os.WriteFile(path, b, 0o644))
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	must(t, os.WriteFile(path, append(b, s...), 0o644))
}

// reseal sets the manifest's sha256 of shard to its bytes' and seals the
// manifest again, as a variant written that way would be.
func reseal(t *testing.T, manifest, shard string) {
	t.Helper()
	b, err := os.ReadFile(manifest)
	must(t, err)
	var m map[string]any
	must(t, json.Unmarshal(b, &m))
	for _, s := range m["shards"].([]any) {
		if s := s.(map[string]any); s["name"] == filepath.Base(shard) {
			s["sha256"] = fileSHA(t, shard)
		}
	}
	b, err = json.Marshal(m)
	must(t, err)
	sum, err := seal.Sum(b, "manifest_sha256")
	must(t, err)
	m["manifest_sha256"] = sum
	b, err = json.Marshal(m)
	must(t, err)
	must(t, os.WriteFile(manifest, b, 0o644))
}

// piece is the shard and offset of a byte inside the manifest's first
// piece in scheme.
func piece(t *testing.T, manifest, scheme string) (string, int) {
	t.Helper()
	b, err := os.ReadFile(manifest)
	must(t, err)
	var m struct {
		Tensors []struct {
			Scheme, Shard string
			Offset        int
		}
	}
	must(t, json.Unmarshal(b, &m))
	for _, p := range m.Tensors {
		if p.Scheme == scheme {
			return filepath.Join(filepath.Dir(manifest), p.Shard), p.Offset + 3
		}
	}
	t.Fatalf("%s: no piece in %s", manifest, scheme)
	return "", 0
}
