package serve

import (
	"errors"
	"logitscope/internal/format/gguf"
	"os"
	"path"
	"path/filepath"
	"sort"
)

// listFiles returns every file of the model directory realDir that the
// server would serve: the names modelFileKind allows that openUnder opens
// (so hidden files and symlinks leaving the directory are left out, by the
// very checks that refuse them over HTTP), limited to the variants, GGUF
// files, hub checkpoints and ONNX exports that verified. Each file is
// hashed through fileHashes, so serving it later does not hash it again.
// Hashing costs a full read at load: for a 1 GB
// checkpoint about 3.5 s of startup (Go's sha256 measured 0.28 GB/s on the
// project's 2-core machine), the demo's 0.5 MB a few milliseconds. The
// sums live in memory only, so every start pays it again.
func listFiles(realDir string, variants []VariantInfo) ([]ModelFile, error) {
	all, err := candidates(realDir, "")
	if err != nil {
		return nil, err
	}
	verified := map[string]bool{}
	for _, v := range variants {
		verified[v.Kind+"/"+v.Name] = true
	}
	var rels []string
	for _, rel := range all {
		if !gguf.IsFileName(rel) || verified[KindGGUF+"/"+rel] {
			rels = append(rels, rel)
		}
	}
	for _, v := range variants {
		if v.Kind == KindONNX {
			rels = append(rels, v.Name) // loadONNX listed only what serves
		}
	}
	for _, v := range variants {
		var sub string
		switch v.Kind {
		case KindVariant:
			sub = path.Join("variants", v.Scheme)
		case KindHub:
			sub = v.Name
		default:
			continue
		}
		more, err := candidates(realDir, sub)
		if err != nil {
			return nil, err
		}
		rels = append(rels, more...)
	}
	files := []ModelFile{}
	for _, rel := range rels {
		fi, err := describe(realDir, rel)
		if errors.Is(err, errSkip) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, fi)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// candidates lists the names in realDir/sub that modelFileKind allows.
func candidates(realDir, sub string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(realDir, filepath.FromSlash(sub)))
	if err != nil {
		return nil, err
	}
	var rels []string
	for _, e := range entries {
		rel := path.Join(sub, e.Name())
		if _, ok := modelFileKind(rel); ok {
			rels = append(rels, rel)
		}
	}
	return rels, nil
}

// errSkip marks a name that exists but is not served.
var errSkip = errors.New("not served")

// describe opens rel as serveFile would and hashes it. A file that
// serveFile would refuse is errSkip; a read error is a real error, since a
// listed hash must be right.
func describe(realDir, rel string) (ModelFile, error) {
	f, st, err := openUnder(realDir, rel)
	if err != nil {
		return ModelFile{}, errSkip
	}
	defer f.Close()
	sum, err := fileHashes.sha256(f.Name(), f, st)
	if err != nil {
		return ModelFile{}, err
	}
	return ModelFile{Path: rel, Size: st.Size(), SHA256: sum}, nil
}
