package hub

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
)

// RepoInfo is the hub API's answer for a repo at a revision
// (GET /api/models/ORG/NAME/revision/REV[?blobs=true]).
type RepoInfo struct {
	ID       string    `json:"id"`
	SHA      string    `json:"sha"` // the commit the revision names
	Siblings []Sibling `json:"siblings"`
}

// Sibling is one file of the repo. Size, BlobID and LFS are there only
// when the API was asked with blobs=true.
type Sibling struct {
	Name   string `json:"rfilename"`
	Size   int64  `json:"size,omitempty"`
	BlobID string `json:"blobId,omitempty"` // the git blob sha1
	LFS    *struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	} `json:"lfs,omitempty"`
}

// ETag is the name the cache stores the file's blob under, the ETag that
// the resolve URL gives it: an LFS file's sha256, else its git blob sha1.
func (s Sibling) ETag() string {
	if s.LFS != nil {
		return s.LFS.SHA256
	}
	return s.BlobID
}

// Names lists the siblings' file names.
func (info RepoInfo) Names() []string {
	names := make([]string, len(info.Siblings))
	for i, s := range info.Siblings {
		names[i] = s.Name
	}
	return names
}

// IndexFile is a sharded checkpoint's index, whose weight_map names the
// shards (Shards).
const IndexFile = "model.safetensors.index.json"

const (
	singleFile  = "model.safetensors"
	configFile  = "config.json"
	tokenFile   = "tokenizer.json"
	maxListed   = 8 // GGUF files an error lists
	anyGGUFHint = "name one: hf:%s/FILE.gguf"
)

// Pick chooses, among a repo's files, those the model needs before its
// weights index is read:
//
//   - file set (hf:ORG/NAME/FILE.gguf): that GGUF file, alone (its metadata
//     holds the config and tokenizer);
//   - a Hugging Face checkpoint (config.json and model.safetensors or its
//     index): config.json, tokenizer.json, generation_config.json and
//     tokenizer_config.json when present, and model.safetensors or the
//     index (Shards then names the rest). GGUF files beside it are left:
//     they are other models of the same weights, several times over;
//   - otherwise a repo's only GGUF file. Several are refused, listing them,
//     rather than downloading one the user did not mean.
//
// repo names the repo in errors. Every name picked is a plain path
// inside the repo (CheckName): the names come from the network.
func Pick(repo string, files []string, file string) ([]string, error) {
	picked, err := pick(repo, files, file)
	if err != nil {
		return nil, err
	}
	for _, name := range picked {
		if err := CheckName(repo, name); err != nil {
			return nil, err
		}
	}
	return picked, nil
}

func pick(repo string, files []string, file string) ([]string, error) {
	has := func(n string) bool { return slices.Contains(files, n) }
	if file != "" {
		if !has(file) {
			return nil, fmt.Errorf("hf:%s has no file %s%s", repo, shown(file), ggufList(repo, files))
		}
		return []string{file}, nil
	}
	if has(configFile) && (has(singleFile) || has(IndexFile)) {
		if !has(tokenFile) {
			return nil, fmt.Errorf("hf:%s has no tokenizer.json: logitscope reads only that tokenizer format (a repo with tokenizer.model alone is SentencePiece)", repo)
		}
		pick := []string{configFile, tokenFile}
		for _, opt := range []string{"generation_config.json", "tokenizer_config.json"} {
			if has(opt) {
				pick = append(pick, opt)
			}
		}
		if has(IndexFile) {
			return append(pick, IndexFile), nil
		}
		return append(pick, singleFile), nil
	}
	ggufs := ggufFiles(files)
	switch len(ggufs) {
	case 1:
		return ggufs, nil
	case 0:
		return nil, fmt.Errorf("hf:%s holds neither a checkpoint (config.json with model.safetensors or %s) nor a GGUF file", repo, IndexFile)
	}
	return nil, fmt.Errorf("hf:%s holds %d GGUF files and no safetensors checkpoint: %s%s", repo, len(ggufs), fmt.Sprintf(anyGGUFHint, repo), ggufList(repo, files))
}

// Shards names the weights files an index lists (index is its bytes),
// which the model needs beside the files Pick chose.
// Each is a .safetensors file: an index that names itself, or another
// index, would be fetched again and again.
func Shards(repo string, index []byte) ([]string, error) {
	files, err := checkpoint.WeightFiles(index, "hf:"+repo+"/"+IndexFile)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := CheckName(repo, f); err != nil {
			return nil, err
		}
		if !strings.HasSuffix(f, ".safetensors") {
			return nil, fmt.Errorf("hf:%s/%s: weight_map names %q, which is not a .safetensors file", repo, IndexFile, f)
		}
	}
	return files, nil
}

// CheckName refuses a file name from the hub that is not a plain relative
// path inside the repo (no "..", no leading "/", no backslash, nothing
// path.Clean would change) or that holds control characters, which
// would reach the terminal in errors: the cache writes and links files by
// these names.
func CheckName(repo, name string) error {
	bad := name == "" || !utf8.ValidString(name) || strings.HasPrefix(name, "/") || strings.Contains(name, `\`) ||
		path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../")
	for _, r := range name {
		bad = bad || unicode.IsControl(r)
	}
	if bad {
		return fmt.Errorf("hf:%s lists a file named %q: not a plain path inside the repo, refused", repo, name)
	}
	return nil
}

func ggufFiles(files []string) []string {
	var g []string
	for _, f := range files {
		if gguf.IsFileName(f) {
			g = append(g, f)
		}
	}
	slices.Sort(g)
	return g
}

// ggufList is ": its GGUF files are a, b, …" for an error, or "".
func ggufList(repo string, files []string) string {
	g := ggufFiles(files)
	if len(g) == 0 {
		return ""
	}
	more := ""
	if len(g) > maxListed {
		more = fmt.Sprintf(" and %d more", len(g)-maxListed)
		g = g[:maxListed]
	}
	for i, name := range g {
		g[i] = shown(name)
	}
	return fmt.Sprintf(" (its GGUF files: %s%s)", strings.Join(g, ", "), more)
}

// shown is a name for an error: as it is when it is a plain path, quoted
// (escapes and all) when it is not.
func shown(name string) string {
	if CheckName("", name) != nil {
		return strconv.Quote(name)
	}
	return name
}
