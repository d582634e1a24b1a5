// Package chain holds the sealed links that say where a capture's logits
// came from, from the checkpoint's files to the machine that ran them:
//
//	inventory → contract → checkpoint identity → backend identity → capture receipt
//
// the inventory (the sha256 of every checkpoint shard, of config.json and of
// the index), the variant contract (what the variant replaces with what),
// the checkpoint identity (the inventory and the contract together, and the
// fingerprint they imply), the backend identity (runtime, device, versions),
// and beside them the panel receipt (each window's token and mask hashes)
// and, for a variant that keeps tensors in float32, the proof that those
// came from the official bytes (Untouched). Each link is sealed as the seed
// seals them, the sha256 of its canonical JSON without its seal field
// (package seal), and names its parents' seals, so that a change anywhere
// is refused naming the link it broke.
//
// The package only describes and checks documents: hashing a checkpoint's
// files (InventoryOf) and comparing them (Inventory.Check) is all it reads.
// Building a contract or a proof needs the variant, which lives above the
// formats (package variant, package capture).
package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"logitscope/internal/format/seal"
)

// Field is the seal's field in every link.
const Field = "seal"

// Formats of the links.
const (
	InventoryFormat  = "logitscope.inventory/1"
	ContractFormat   = "logitscope.contract/1"
	CheckpointFormat = "logitscope.checkpoint/1"
	BackendFormat    = "logitscope.backend/1"
	UntouchedFormat  = "logitscope.untouched/1"
	PanelFormat      = "logitscope.panel/1"
)

// Chain is the links a capture receipt carries. Untouched is there for a
// variant that keeps any of the checkpoint's tensors, Panel for a panel.
type Chain struct {
	Inventory  *Inventory  `json:"inventory"`
	Contract   *Contract   `json:"contract"`
	Checkpoint *Checkpoint `json:"checkpoint"`
	Backend    *Backend    `json:"backend"`
	Untouched  *Untouched  `json:"untouched,omitempty"`
	Panel      *Panel      `json:"panel,omitempty"`
}

// link is what every link does: say its name in errors, its format, its
// seal and the seals of the links it names.
type link interface {
	name() string
	format() string
	sealed() *string
	header() *string // the Format field
}

// Seal sets l's format and its seal, the sha256 of its canonical JSON
// without the seal field.
func Seal(l link) error {
	*l.header() = l.format()
	s, err := sum(l)
	*l.sealed() = s
	return err
}

func sum(l link) (string, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return "", err
	}
	return seal.Sum(b, Field)
}

// verify checks l's format and that its seal is the hash of its content.
func verify(l link) error {
	switch {
	case *l.header() != l.format():
		return fmt.Errorf("%s: format %q, want %q", l.name(), *l.header(), l.format())
	case *l.sealed() == "":
		return fmt.Errorf("%s: not sealed (no %s field)", l.name(), Field)
	}
	s, err := sum(l)
	if err != nil {
		return fmt.Errorf("%s: %v", l.name(), err)
	}
	if s != *l.sealed() {
		return fmt.Errorf("%s: seal %s, but its content hashes to %s: the link was changed after it was sealed", l.name(), *l.sealed(), s)
	}
	return nil
}

// names checks that child names parent by the seal it records.
func names(child link, field, recorded string, parent link) error {
	if recorded != *parent.sealed() {
		return fmt.Errorf("%s: %s %s, but the %s's seal is %s: the %s is not the one it was made from",
			child.name(), field, short(recorded), parent.name(), short(*parent.sealed()), parent.name())
	}
	return nil
}

// Verify checks every link's seal and that each names its parents, from
// the inventory down, so the first error names the link that changed.
func (c *Chain) Verify() error {
	for _, l := range []struct {
		l    link
		name string
	}{{c.Inventory, "inventory"}, {c.Contract, "contract"}, {c.Checkpoint, "checkpoint"}, {c.Backend, "backend"}} {
		if isNil(l.l) {
			return fmt.Errorf("chain: no %s link", l.name)
		}
	}
	all := []link{c.Inventory, c.Contract, c.Checkpoint, c.Backend}
	if c.Untouched != nil {
		all = append(all, c.Untouched)
	}
	if c.Panel != nil {
		all = append(all, c.Panel)
	}
	for _, l := range all {
		if err := verify(l); err != nil {
			return err
		}
	}
	checks := []error{
		names(c.Contract, "inventory_sha256", c.Contract.Inventory, c.Inventory),
		names(c.Checkpoint, "inventory_sha256", c.Checkpoint.Inventory, c.Inventory),
		names(c.Checkpoint, "contract_sha256", c.Checkpoint.Contract, c.Contract),
	}
	switch {
	case c.Untouched != nil:
		checks = append(checks, names(c.Checkpoint, "untouched_sha256", c.Checkpoint.Untouched, c.Untouched))
	case c.Checkpoint.Untouched != "":
		checks = append(checks, fmt.Errorf("checkpoint: untouched_sha256 %s, but the chain has no untouched link", short(c.Checkpoint.Untouched)))
	}
	checks = append(checks,
		names(c.Backend, "checkpoint_sha256", c.Backend.Checkpoint, c.Checkpoint),
		c.Checkpoint.implied(c.Inventory))
	if c.Untouched != nil {
		checks = append(checks,
			names(c.Untouched, "contract_sha256", c.Untouched.Contract, c.Contract),
			c.Untouched.against(c.Inventory))
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

func isNil(l link) bool {
	switch l := l.(type) {
	case *Inventory:
		return l == nil
	case *Contract:
		return l == nil
	case *Checkpoint:
		return l == nil
	case *Backend:
		return l == nil
	}
	return l == nil
}

// IntsSHA256 is how a window's token ids and attention mask are hashed:
// the sha256 (hex) of the list as a JSON array, `[1,2,3]`.
func IntsSHA256(v []int) string {
	if v == nil {
		v = []int{}
	}
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// short is a hash cut for messages, as the rest of logitscope prints them.
func short(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	if s == "" {
		return `""`
	}
	return s
}
