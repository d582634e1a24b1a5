package chain

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"logitscope/internal/format/checkpoint"
)

// File is one file of an inventory: its name beside config.json, its size
// and its sha256.
type File struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Inventory is the checkpoint's files as they were when it was taken:
// config.json, the index (absent for a single model.safetensors), and
// every weights shard, in the order checkpoint.Open reads them. A model
// opened from a GGUF file has that file as its one shard.
type Inventory struct {
	Format string `json:"format"`
	Config File   `json:"config"`
	Index  *File  `json:"index,omitempty"`
	Shards []File `json:"shards"`
	Seal   string `json:"seal"`
}

func (*Inventory) name() string      { return "inventory" }
func (*Inventory) format() string    { return InventoryFormat }
func (l *Inventory) sealed() *string { return &l.Seal }
func (l *Inventory) header() *string { return &l.Format }

// Fingerprint is the checkpoint fingerprint the inventory implies
// (checkpoint.FingerprintOf: config.json, then the shards; a GGUF model's
// is its file's sha256).
func (inv *Inventory) Fingerprint() string {
	if inv.Index == nil && len(inv.Shards) == 1 && filepath.Ext(inv.Shards[0].Name) == ".gguf" {
		return inv.Shards[0].SHA256
	}
	sums := []checkpoint.FileSum{{Name: inv.Config.Name, SHA256: inv.Config.SHA256}}
	for _, s := range inv.Shards {
		sums = append(sums, checkpoint.FileSum{Name: s.Name, SHA256: s.SHA256})
	}
	return checkpoint.FingerprintOf(sums)
}

// InventoryOf takes the inventory of an opened checkpoint, sealed. It
// reads every weight byte (the checkpoint's cached sums spare a second
// reading when Fingerprint has run).
func InventoryOf(ck *checkpoint.Checkpoint) (*Inventory, error) {
	sums, err := ck.FileSums()
	if err != nil {
		return nil, err
	}
	inv := &Inventory{}
	for i, s := range sums {
		f := File{Name: s.Name, SHA256: s.SHA256, Bytes: s.Bytes}
		if i == 0 && ck.GGUF == "" {
			inv.Config = f
		} else {
			inv.Shards = append(inv.Shards, f)
		}
	}
	if ck.GGUF != "" { // the derived config, which the file's metadata fixes
		if inv.Config, err = fileOf(filepath.Join(ck.Dir, "config.json")); err != nil {
			return nil, err
		}
	}
	if p := ck.IndexPath(); p != "" {
		f, err := fileOf(p)
		if err != nil {
			return nil, err
		}
		inv.Index = &f
	}
	return inv, Seal(inv)
}

func fileOf(path string) (File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return File{}, err
	}
	sum, err := checkpoint.FileSHA256(path)
	return File{Name: filepath.Base(path), Bytes: st.Size(), SHA256: sum}, err
}

// Check compares the inventory with local's (the same checkpoint's files
// as they are now), naming the first file that differs:
// `inventory: shard model-00002.safetensors: sha256 ab12… != cd34…`
// (recorded, then local).
func (inv *Inventory) Check(local *Inventory) error {
	cmpFile := func(what string, want, got File) error {
		switch {
		case want.Name != got.Name:
			return fmt.Errorf("inventory: %s is %s, the local checkpoint's is %s", what, want.Name, got.Name)
		case want.SHA256 != got.SHA256:
			return fmt.Errorf("inventory: %s %s: sha256 %s != %s", what, want.Name, short(want.SHA256), short(got.SHA256))
		case want.Bytes != got.Bytes:
			return fmt.Errorf("inventory: %s %s: %d bytes != %d", what, want.Name, want.Bytes, got.Bytes)
		}
		return nil
	}
	if err := cmpFile("config", inv.Config, local.Config); err != nil {
		return err
	}
	switch {
	case inv.Index == nil && local.Index != nil:
		return fmt.Errorf("inventory: no index, but the local checkpoint has %s", local.Index.Name)
	case inv.Index != nil && local.Index == nil:
		return fmt.Errorf("inventory: index %s is not in the local checkpoint", inv.Index.Name)
	case inv.Index != nil:
		if err := cmpFile("index", *inv.Index, *local.Index); err != nil {
			return err
		}
	}
	have := map[string]File{}
	for _, s := range local.Shards {
		have[s.Name] = s
	}
	for _, s := range inv.Shards {
		got, ok := have[s.Name]
		if !ok {
			return fmt.Errorf("inventory: shard %s is not in the local checkpoint", s.Name)
		}
		if err := cmpFile("shard", s, got); err != nil {
			return err
		}
		delete(have, s.Name)
	}
	for _, s := range local.Shards {
		if _, extra := have[s.Name]; extra {
			return fmt.Errorf("inventory: the local checkpoint has shard %s, which the inventory does not list", s.Name)
		}
	}
	return nil
}

// shard is the inventory's entry for a shard, by name.
func (inv *Inventory) shard(name string) (File, bool) {
	for _, s := range inv.Shards {
		if s.Name == name {
			return s, true
		}
	}
	return File{}, false
}

// ReadInventory reads a sealed inventory (one that `logitscope inventory`
// or a capture's dry run printed), checking its seal.
func ReadInventory(path string) (*Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var inv Inventory
	if err := json.Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if err := verify(&inv); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &inv, nil
}
