package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"sync"
	"time"
)

// fileHashes is shared by every Server and by LoadModel, so that the hash
// LoadModel computes for a model's file list is the one the file's first
// request finds: each file is read for hashing once per process. Sharing
// is safe because an entry is keyed by path, size and mtime.
var fileHashes = newETagCache()

// etagCache remembers each file's sha256 so that a multi-gigabyte shard is
// hashed once, not on every range request. A file rewritten in place
// changes size or mtime and so misses the cache.
type etagCache struct {
	mu      sync.Mutex
	entries map[etagKey]*etagEntry
}

type etagKey struct {
	path  string
	size  int64
	mtime time.Time
}

// etagEntry lets concurrent first requests for one file wait for a single
// hash instead of each reading the whole file.
type etagEntry struct {
	done chan struct{}
	sum  string // lowercase hex sha256
	err  error
}

func newETagCache() *etagCache { return &etagCache{entries: map[etagKey]*etagEntry{}} }

// get returns the strong ETag `"sha256-<hex>"` of f, whose path and stat
// are given.
func (c *etagCache) get(path string, f *os.File, st os.FileInfo) (string, error) {
	sum, err := c.sha256(path, f, st)
	if err != nil {
		return "", err
	}
	return sha256ETag(sum), nil
}

func sha256ETag(sum string) string { return `"sha256-` + sum + `"` }

// sha256 returns the hex sha256 of f, whose path and stat are given. It
// hashes f itself (not the path again), so the sum describes the bytes
// this request will serve.
func (c *etagCache) sha256(path string, f *os.File, st os.FileInfo) (string, error) {
	key := etagKey{path, st.Size(), st.ModTime()}
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		e = &etagEntry{done: make(chan struct{})}
		c.entries[key] = e
	}
	c.mu.Unlock()
	if ok {
		<-e.done
		return e.sum, e.err
	}
	h := sha256.New()
	_, e.err = io.Copy(h, io.NewSectionReader(f, 0, st.Size()))
	if e.err == nil {
		e.sum = hex.EncodeToString(h.Sum(nil))
	}
	close(e.done)
	if e.err != nil {
		c.mu.Lock()
		delete(c.entries, key) // let a later request try again
		c.mu.Unlock()
	}
	return e.sum, e.err
}
