package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"logitscope/internal/format/safetensors"
)

// WeightFiles and FingerprintOf give what Open and Fingerprint give, from
// the index's bytes and the files' sums alone: the page fingerprints a
// folder from the user's disk with them, hashing the files itself.
func TestFingerprintOf(t *testing.T) {
	s1, s2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	for _, c := range []struct {
		name      string
		shards    map[string][]safetensors.Tensor
		weightMap map[string]string
		want      []string
	}{
		{"single file", map[string][]safetensors.Tensor{"model.safetensors": {embed, norm, head}}, nil, []string{"model.safetensors"}},
		// The index lists the second shard first: Open reads them in name order.
		{"sharded", map[string][]safetensors.Tensor{s1: {embed, norm}, s2: {head}},
			map[string]string{head.Name: s2, embed.Name: s1, norm.Name: s1}, []string{s1, s2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := modelDir(t, t.TempDir(), c.shards, c.weightMap)
			var index []byte
			if c.weightMap != nil {
				var err error
				if index, err = os.ReadFile(filepath.Join(dir, indexName)); err != nil {
					t.Fatal(err)
				}
			}
			files, err := WeightFiles(index, indexName)
			if err != nil || !slices.Equal(files, c.want) {
				t.Fatalf("WeightFiles = %v, %v; want %v", files, err, c.want)
			}
			var sums []FileSum
			for _, name := range append([]string{"config.json"}, files...) {
				data, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(data)
				sums = append(sums, FileSum{Name: name, SHA256: hex.EncodeToString(sum[:])})
			}
			ck, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			fp, err := ck.Fingerprint()
			if err != nil || FingerprintOf(sums) != fp {
				t.Errorf("FingerprintOf = %s, Fingerprint = %s, %v", FingerprintOf(sums), fp, err)
			}
		})
	}
	if _, err := WeightFiles([]byte(`{"weight_map":{"a":"../x.safetensors"}}`), indexName); err == nil {
		t.Error("WeightFiles took a shard outside the folder")
	} else {
		wantErr(t, err, indexName, `weight_map names "../x.safetensors", which is not a file name`)
	}
}
