package download

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"logitscope/internal/format/gguf"
	"logitscope/internal/model/hub"
)

// CacheDir is the hub cache huggingface_hub uses: $HF_HUB_CACHE, else
// $HUGGINGFACE_HUB_CACHE (its older name), else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
func CacheDir() (string, error) {
	for _, env := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := os.Getenv(env); d != "" {
			return d, nil
		}
	}
	home, err := hfHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "hub"), nil
}

// hfHome is $HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface.
func hfHome() (string, error) {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("hub cache: no HF_HUB_CACHE, HF_HOME or home directory: %v", err)
	}
	return filepath.Join(home, ".cache", "huggingface"), nil
}

// token is $HF_TOKEN, else $HUGGING_FACE_HUB_TOKEN, else the file that
// `hf auth login` writes ($HF_TOKEN_PATH, else $HF_HOME/token); "" when
// none.
func token() string {
	for _, env := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if t := strings.TrimSpace(os.Getenv(env)); t != "" {
			return t
		}
	}
	path := os.Getenv("HF_TOKEN_PATH")
	if path == "" {
		home, err := hfHome()
		if err != nil {
			return ""
		}
		path = filepath.Join(home, "token")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// RepoFolder is a repo's folder in the cache: models--ORG--NAME.
func RepoFolder(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// cached finds id's snapshot in the cache without the network: the commit
// is the revision itself or refs/REV's, and the snapshot must hold every
// file the model needs (hub.Pick over the snapshot's files, and the shards its
// index names). It returns the path a model opens from: the snapshot
// folder, or the GGUF file.
func cached(cache string, id hub.ID) (string, error) {
	repoDir := RepoFolder(cache, id.Repo)
	commit := id.Revision
	if !hub.IsCommit(commit) {
		b, err := os.ReadFile(filepath.Join(repoDir, "refs", filepath.FromSlash(id.Revision)))
		if err != nil {
			return "", fmt.Errorf("%s: the cache has no download of revision %s (%s)", id, id.Revision, filepath.Join(repoDir, "refs"))
		}
		commit = strings.TrimSpace(string(b))
	}
	snap := filepath.Join(repoDir, "snapshots", commit)
	var files []string
	err := filepath.WalkDir(snap, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if _, err := os.Stat(p); err == nil { // a link to a blob that is there
			rel, _ := filepath.Rel(snap, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: the cache has no snapshot %s", id, snap)
	} else if err != nil {
		return "", fmt.Errorf("%s: %v", id, err)
	}
	need, err := hub.Pick(id.Repo, files, id.File)
	if err != nil {
		return "", fmt.Errorf("%s: the cached snapshot %s is incomplete: %v", id, snap, err)
	}
	if len(need) == 1 && gguf.IsFileName(need[0]) {
		return filepath.Join(snap, filepath.FromSlash(need[0])), nil
	}
	for _, f := range need {
		if f != hub.IndexFile {
			continue
		}
		shards, err := indexShards(snap, id)
		if err != nil {
			return "", err
		}
		for _, s := range shards {
			if _, err := os.Stat(filepath.Join(snap, s)); err != nil {
				return "", fmt.Errorf("%s: the cached snapshot %s is incomplete: no %s", id, snap, s)
			}
		}
	}
	return snap, nil
}

// indexShards names the shards the weight index of snapshot snap lists.
func indexShards(snap string, id hub.ID) ([]string, error) {
	index, err := os.ReadFile(filepath.Join(snap, hub.IndexFile))
	if err != nil {
		return nil, err
	}
	return hub.Shards(id.Repo, index)
}
