package hub

import (
	"fmt"
	"logitscope/internal/format/gguf"
	"net/url"
	"regexp"
	"strings"
)

// Prefix marks a hub id wherever a model path is taken: --model hf:ORG/NAME.
const Prefix = "hf:"

// DefaultEndpoint is the hub that HF_ENDPOINT replaces.
const DefaultEndpoint = "https://huggingface.co"

// DefaultRevision is the branch an id without @REV names.
const DefaultRevision = "main"

// ID names a model on the hub: a repo, a revision (a branch, a tag or a
// commit) and, for a repo of llama.cpp files, the GGUF file to run.
type ID struct {
	Repo     string // ORG/NAME
	Revision string // main unless the id says @REV
	File     string // a .gguf path inside the repo, or "" for the model the repo holds
}

// IsID says whether a --model value is a hub id (hf:...).
func IsID(s string) bool { return strings.HasPrefix(s, Prefix) }

// repoPart is one half of ORG/NAME as huggingface_hub's validate_repo_id
// accepts it: word characters, '-' and '.', starting and ending with a word
// character.
var repoPart = regexp.MustCompile(`^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$`)

// commitHash is a full git commit id, as the hub's X-Repo-Commit gives it.
var commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)

// IsCommit says whether rev is a full commit id, which names the same files
// forever (a branch moves).
func IsCommit(rev string) bool { return commitHash.MatchString(rev) }

// Parse reads ORG/NAME[/FILE.gguf][@REV], with or without the hf: prefix.
// The revision follows the first '@' and may hold slashes (refs/pr/1).
func Parse(s string) (ID, error) {
	orig := s
	s = strings.TrimPrefix(s, Prefix)
	id := ID{Revision: DefaultRevision}
	if path, rev, ok := strings.Cut(s, "@"); ok {
		if err := checkRevision(rev); err != nil {
			return ID{}, fmt.Errorf("hub id %q: revision %q: %v", orig, rev, err)
		}
		s, id.Revision = path, rev
	}
	parts := strings.SplitN(s, "/", 3)
	if len(parts) < 2 {
		return ID{}, fmt.Errorf("hub id %q: want ORG/NAME[@REV], as huggingface.co names a model (Qwen/Qwen2.5-0.5B-Instruct)", orig)
	}
	for _, p := range parts[:2] {
		if !repoPart.MatchString(p) || strings.Contains(p, "--") || strings.Contains(p, "..") || len(p) > 96 {
			return ID{}, fmt.Errorf("hub id %q: %q is not a repo name (letters, digits, '_', '-', '.'; no \"--\" or \"..\"; a letter or digit first and last)", orig, p)
		}
	}
	id.Repo = parts[0] + "/" + parts[1]
	if len(parts) == 3 {
		f := parts[2]
		if err := checkFile(f); err != nil {
			return ID{}, fmt.Errorf("hub id %q: file %q: %v", orig, f, err)
		}
		if !gguf.IsFileName(f) {
			return ID{}, fmt.Errorf("hub id %q: file %q: only a .gguf file runs by itself; name the repo (hf:%s) for its safetensors checkpoint", orig, f, id.Repo)
		}
		id.File = f
	}
	return id, nil
}

// String is the id as Parse reads it, with the hf: prefix; the revision is
// left out when it is main.
func (id ID) String() string {
	s := Prefix + id.Repo
	if id.File != "" {
		s += "/" + id.File
	}
	if id.Revision != DefaultRevision {
		s += "@" + id.Revision
	}
	return s
}

// Name is the repo's name without its organization (Qwen2.5-0.5B-Instruct).
func (id ID) Name() string {
	_, name, _ := strings.Cut(id.Repo, "/")
	return name
}

func checkRevision(rev string) error {
	switch {
	case rev == "":
		return fmt.Errorf("empty")
	case strings.ContainsFunc(rev, func(r rune) bool {
		return r <= ' ' || r == 0x7f || r == '\\' || r == '~' || r == '^' || r == ':' || r == '?' || r == '*' || r == '['
	}):
		return fmt.Errorf("not a git branch, tag or commit")
	case strings.Contains(rev, ".."), strings.HasPrefix(rev, "/"), strings.HasSuffix(rev, "/"), strings.Contains(rev, "//"):
		return fmt.Errorf("not a git branch, tag or commit")
	}
	// git's ref names have no component that begins with a dot: "." would
	// name the folder it is in.
	for _, seg := range strings.Split(rev, "/") {
		if strings.HasPrefix(seg, ".") {
			return fmt.Errorf("not a git branch, tag or commit")
		}
	}
	return nil
}

// checkFile refuses a path that could leave the snapshot folder or that a
// hub repo cannot hold.
func checkFile(f string) error {
	if f == "" {
		return fmt.Errorf("empty")
	}
	for _, seg := range strings.Split(f, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.ContainsFunc(seg, func(r rune) bool { return r < ' ' || r == 0x7f || r == '\\' }) {
			return fmt.Errorf("not a file path inside a repo")
		}
	}
	return nil
}

// APIURL is the hub API's URL for the repo at the id's revision, which
// answers the commit (sha) and the files (siblings). With blobs, each
// sibling also carries its size and blob id and, for an LFS file, its
// sha256.
func APIURL(endpoint string, id ID, blobs bool) string {
	u := strings.TrimRight(endpoint, "/") + "/api/models/" + id.Repo + "/revision/" + url.PathEscape(id.Revision)
	if blobs {
		u += "?blobs=true"
	}
	return u
}

// ResolveURL is the URL of one file of the repo at rev (a commit, once the
// API has named it), as huggingface_hub's hf_hub_url writes it: the
// revision escaped whole (refs%2Fpr%2F1), the path segment by segment.
func ResolveURL(endpoint, repo, rev, file string) string {
	segs := strings.Split(file, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.TrimRight(endpoint, "/") + "/" + repo + "/resolve/" + url.PathEscape(rev) + "/" + strings.Join(segs, "/")
}
