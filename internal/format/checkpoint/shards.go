package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"logitscope/internal/format/safetensors"
)

const brokenLink = "broken symlink (incomplete download?)"

const (
	singleWeights = "model.safetensors"
	indexName     = "model.safetensors.index.json"
)

// openShards opens the weights: the shards an index names when there is
// one, else model.safetensors. On error the caller closes what was opened.
func (c *Checkpoint) openShards() error {
	c.tensors = map[string]*safetensors.File{}
	indexPath := filepath.Join(c.Dir, indexName)
	data, err := os.ReadFile(indexPath)
	switch {
	case err == nil:
		return c.openIndexed(indexPath, data)
	case !errors.Is(err, os.ErrNotExist):
		return pathError(err)
	}
	path := filepath.Join(c.Dir, singleWeights)
	if _, err := os.Lstat(path); err != nil {
		return fmt.Errorf("checkpoint: no safetensors weights in %s (neither %s nor %s)", c.Dir, indexName, singleWeights)
	}
	if _, err := os.Stat(path); err != nil && errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checkpoint: %s: %s", path, brokenLink)
	}
	return c.addShard(path)
}

// openIndexed trusts the index only as far as it can be checked: every file
// it names must exist and every tensor must be where it says. Tensors a
// shard holds beyond the index are still served, as transformers loads them
// too; the duplicate check in addShard keeps that unambiguous.
func (c *Checkpoint) openIndexed(indexPath string, data []byte) error {
	weightMap, files, err := parseIndex(indexPath, data)
	if err != nil {
		return err
	}
	for _, file := range files {
		path := filepath.Join(c.Dir, file)
		if _, err := os.Stat(path); err != nil {
			why := "does not exist"
			if _, lerr := os.Lstat(path); lerr == nil {
				why = "is a " + brokenLink
			} else if !errors.Is(err, os.ErrNotExist) {
				why = err.Error()
			}
			return fmt.Errorf("checkpoint: %s: weight_map names %s, which %s", indexPath, file, why)
		}
		if err := c.addShard(path); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(weightMap)) { // sorted: stable error
		file := weightMap[name]
		f, ok := c.tensors[name]
		switch {
		case !ok:
			return fmt.Errorf("checkpoint: %s: weight_map puts tensor %q in %s, which does not contain it", indexPath, name, file)
		case filepath.Base(f.Path) != file:
			return fmt.Errorf("checkpoint: %s: weight_map puts tensor %q in %s, but it is in %s", indexPath, name, file, filepath.Base(f.Path))
		}
	}
	return nil
}

// WeightFiles names the weights files Open reads, in the order it reads
// them (the order Fingerprint hashes them): model.safetensors when index,
// the bytes of model.safetensors.index.json, is nil, else every file the
// index's weight_map names, sorted. indexPath names the index in errors.
// The page lists a folder from the user's disk with it.
func WeightFiles(index []byte, indexPath string) ([]string, error) {
	if index == nil {
		return []string{singleWeights}, nil
	}
	_, files, err := parseIndex(indexPath, index)
	return files, err
}

// parseIndex reads an index's weight_map (tensor name -> file) and the
// files it names, sorted and each once. Shards live beside the index:
// a name that is not a plain file name is refused.
func parseIndex(indexPath string, data []byte) (map[string]string, []string, error) {
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: %s", indexPath, jsonError(err))
	}
	if len(index.WeightMap) == 0 {
		return nil, nil, fmt.Errorf("checkpoint: %s: weight_map is missing or empty", indexPath)
	}
	var files []string
	for _, file := range index.WeightMap {
		files = append(files, file)
	}
	slices.Sort(files)
	files = slices.Compact(files)
	for _, file := range files {
		if file == "" || file == "." || file == ".." || strings.ContainsAny(file, `/\`) {
			return nil, nil, fmt.Errorf("checkpoint: %s: weight_map names %q, which is not a file name", indexPath, file)
		}
	}
	return index.WeightMap, files, nil
}

func (c *Checkpoint) addShard(path string) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	c.shards = append(c.shards, f)
	for _, name := range f.Names() {
		if prev, dup := c.tensors[name]; dup {
			return fmt.Errorf("checkpoint: tensor %q is in two shards: %s and %s", name, prev.Path, path)
		}
		c.tensors[name] = f
	}
	return nil
}
