package variant

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/safetensors"
)

// Untouched proves that every piece v keeps in float32 (whatever its
// policy leaves out, and every vector) is ck's own values: for each, the
// byte range of the tensor's rows in ck's shard, their sha256 and that of
// their values widened to float32, and the sha256 of the bytes the engine
// loads from v's shard, which must equal it. A piece that is not the
// checkpoint's is refused naming it. contract is the seal of the contract
// the proof belongs to.
//
// It reads every kept byte on both sides: for an experts-only variant of
// a large model, that is everything outside the experts, read once more.
func Untouched(ck *checkpoint.Checkpoint, v *Variant, contract string) (*chain.Untouched, error) {
	u := &chain.Untouched{Contract: contract, Tensors: []chain.Kept{}}
	for _, name := range v.Names() {
		for _, p := range v.Pieces(name) {
			if p.Scheme != SchemeF32 {
				continue
			}
			k, err := kept(ck, v, p)
			if err != nil {
				return nil, err
			}
			if err := k.Check(); err != nil {
				return nil, fmt.Errorf("%v: %s keeps values that are not %s's", err, filepath.Join(v.Dir, p.Shard), ck.Source())
			}
			u.Tensors = append(u.Tensors, k)
		}
	}
	return u, chain.Seal(u)
}

// CheckUntouched recomputes the proof from ck's and v's files as they are
// now and compares it with the recorded one, naming the first piece that
// differs.
func CheckUntouched(ck *checkpoint.Checkpoint, v *Variant, recorded *chain.Untouched) error {
	local, err := Untouched(ck, v, recorded.Contract)
	if err != nil {
		return err
	}
	return recorded.Compare(local)
}

// kept hashes one float32 piece of v and the same rows of ck's tensor.
func kept(ck *checkpoint.Checkpoint, v *Variant, p Piece) (chain.Kept, error) {
	k := chain.Kept{Name: p.Name, Rows: p.Rows}
	info, shard, ok := ck.Info(p.Name)
	if !ok {
		return k, fmt.Errorf("%s: untouched: tensor %s is in the variant but not in the checkpoint %s", v.Dir, p.Name, ck.Source())
	}
	elems := info.NumElements()
	if elems != p.cols()*p.Shape[0] {
		return k, fmt.Errorf("%s: untouched: tensor %s has %d values in the checkpoint, the variant's shape %v holds %d", v.Dir, p.Name, elems, p.Shape, p.cols()*p.Shape[0])
	}
	row := int64(p.cols() * info.DType.Size())
	off := info.Offset + int64(p.Rows[0])*row
	n := int64(p.Rows[1]-p.Rows[0]) * row
	raw, err := readAt(shard, off, n)
	if err != nil {
		return k, err
	}
	vals := make([]float32, p.cols()*(p.Rows[1]-p.Rows[0]))
	if err := safetensors.DecodeFloat32(info.DType, raw, vals); err != nil {
		return k, fmt.Errorf("%s: tensor %s: %v", shard, p.Name, err)
	}
	k.Official = chain.Span{Shard: filepath.Base(shard), DType: string(info.DType), Offset: off, Length: n,
		SHA256: sum(raw), F32SHA256: sum(safetensors.EncodeF32(vals))}
	loaded, err := v.Raw(p)
	if err != nil {
		return k, err
	}
	k.Loaded = chain.Span{Shard: p.Shard, DType: string(safetensors.F32), Offset: p.Offset, Length: p.Length, SHA256: sum(loaded)}
	return k, nil
}

func readAt(path string, off, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("%s: reading [%d, %d): %w", path, off, off+n, err)
	}
	return b, nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Replaced counts the tensors v stores in each quantized scheme in place
// of the checkpoint's: what a contract says the variant replaces.
func (v *Variant) Replaced() map[string]int {
	n := map[string]int{}
	for _, name := range v.Names() {
		if s := v.Pieces(name)[0].Scheme; s != SchemeF32 {
			n[s]++
		}
	}
	return n
}
