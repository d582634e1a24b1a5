package chain

import "fmt"

// Untouched proves that the tensors a variant keeps in float32 are the
// official checkpoint's: for every such piece, where its bytes lie in the
// checkpoint (shard, dtype, byte range, sha256, and the sha256 of those
// values widened to float32 as a variant stores them) and where the
// engine loaded them from (the variant's shard and range, and their
// sha256). The two float32 hashes are equal, and the official shard is
// the inventory's: so the bytes that ran are the checkpoint's, value for
// value. A verifier recomputes every hash from the files (package
// variant's CheckUntouched).
type Untouched struct {
	Format   string `json:"format"`
	Contract string `json:"contract_sha256"`
	Tensors  []Kept `json:"tensors"`
	Seal     string `json:"seal"`
}

func (*Untouched) name() string      { return "untouched" }
func (*Untouched) format() string    { return UntouchedFormat }
func (l *Untouched) sealed() *string { return &l.Seal }
func (l *Untouched) header() *string { return &l.Format }

// Kept is one piece the variant keeps: rows [Rows[0], Rows[1]) of a
// tensor (all of them unless the variant split it across shards).
type Kept struct {
	Name     string `json:"name"`
	Rows     [2]int `json:"rows"`
	Official Span   `json:"official"`
	Loaded   Span   `json:"loaded"`
}

// Span is a range of bytes in a file and their sha256. F32SHA256 is the
// sha256 of the values as little-endian float32 (equal to SHA256 when the
// dtype is F32).
type Span struct {
	Shard     string `json:"shard"`
	DType     string `json:"dtype"`
	Offset    int64  `json:"offset"`
	Length    int64  `json:"length"`
	SHA256    string `json:"sha256"`
	F32SHA256 string `json:"f32_sha256,omitempty"`
}

// Where names the piece in messages.
func (k Kept) Where() string {
	return fmt.Sprintf("untouched: tensor %s rows [%d, %d)", k.Name, k.Rows[0], k.Rows[1])
}

// Check is what the document itself proves: each piece's loaded bytes
// hash to the official values', and the official dtype F32 means the
// bytes are the same.
func (k Kept) Check() error {
	o := k.Official
	switch {
	case o.DType == "F32" && o.F32SHA256 != "" && o.F32SHA256 != o.SHA256:
		return fmt.Errorf("%s: official F32 bytes hash to %s, their float32 values to %s", k.Where(), short(o.SHA256), short(o.F32SHA256))
	case k.Loaded.SHA256 != o.f32():
		return fmt.Errorf("%s: loaded %s [%d, %d) sha256 %s != official %s [%d, %d) as float32 %s",
			k.Where(), k.Loaded.Shard, k.Loaded.Offset, k.Loaded.Offset+k.Loaded.Length, short(k.Loaded.SHA256),
			o.Shard, o.Offset, o.Offset+o.Length, short(o.f32()))
	}
	return nil
}

func (s Span) f32() string {
	if s.F32SHA256 == "" {
		return s.SHA256
	}
	return s.F32SHA256
}

// against checks every piece and that its official shard is one the
// inventory lists.
func (u *Untouched) against(inv *Inventory) error {
	for _, k := range u.Tensors {
		if _, ok := inv.shard(k.Official.Shard); !ok {
			return fmt.Errorf("%s: official shard %s is not in the inventory", k.Where(), k.Official.Shard)
		}
		if err := k.Check(); err != nil {
			return err
		}
	}
	return nil
}

// Compare checks a recomputed proof against the recorded one, piece by
// piece, naming the first that differs.
func (u *Untouched) Compare(local *Untouched) error {
	have := map[[3]any]Kept{}
	for _, k := range local.Tensors {
		have[[3]any{k.Name, k.Rows[0], k.Rows[1]}] = k
	}
	for _, k := range u.Tensors {
		got, ok := have[[3]any{k.Name, k.Rows[0], k.Rows[1]}]
		switch {
		case !ok:
			return fmt.Errorf("%s: the local variant does not keep it in float32", k.Where())
		case got.Official != k.Official:
			return fmt.Errorf("%s: official %s [%d, %d) sha256 %s != %s (the local checkpoint's)",
				k.Where(), k.Official.Shard, k.Official.Offset, k.Official.Offset+k.Official.Length, short(k.Official.SHA256), short(got.Official.SHA256))
		case got.Loaded != k.Loaded:
			return fmt.Errorf("%s: loaded %s [%d, %d) sha256 %s != %s (the local variant's)",
				k.Where(), k.Loaded.Shard, k.Loaded.Offset, k.Loaded.Offset+k.Loaded.Length, short(k.Loaded.SHA256), short(got.Loaded.SHA256))
		}
		delete(have, [3]any{k.Name, k.Rows[0], k.Rows[1]})
	}
	for _, k := range local.Tensors {
		if _, extra := have[[3]any{k.Name, k.Rows[0], k.Rows[1]}]; extra {
			return fmt.Errorf("%s: the local variant keeps it in float32, the proof does not list it", k.Where())
		}
	}
	return nil
}
