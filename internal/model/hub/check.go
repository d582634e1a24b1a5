package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"regexp"
	"strings"
)

// NormalizeETag is an ETag header as the cache names blobs by it: without
// a weak validator's W/ and without quotes (huggingface_hub's
// _normalize_etag).
func NormalizeETag(h string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(h), "W/"), `"`)
}

var (
	sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)
	sha1Hex   = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// Check verifies a downloaded file against the hub's word for it: its size
// and its ETag, which for an LFS file is the sha256 of its bytes and for a
// file kept in git the sha1 of its git blob ("blob SIZE\0" + bytes). Write
// the file's bytes into it, then call Verify. An ETag of another form
// (a mirror's) checks the size alone.
type Check struct {
	what string // "hf:REPO/FILE", for errors
	etag string
	size int64
	n    int64
	h    hash.Hash
	kind string
}

// NewCheck starts checking a file of size bytes whose blob is named etag.
// what names it in errors.
func NewCheck(what, etag string, size int64) *Check {
	c := &Check{what: what, etag: etag, size: size}
	switch {
	case sha256Hex.MatchString(etag):
		c.h, c.kind = sha256.New(), "sha256"
	case sha1Hex.MatchString(etag):
		c.h, c.kind = sha1.New(), "git blob sha1"
		fmt.Fprintf(c.h, "blob %d\x00", size)
	}
	return c
}

func (c *Check) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if c.h != nil {
		c.h.Write(p)
	}
	return len(p), nil
}

// Verify says whether the bytes written are the file the hub described.
func (c *Check) Verify() error {
	if c.n != c.size {
		return fmt.Errorf("%s: downloaded %d bytes, the hub says %d", c.what, c.n, c.size)
	}
	if c.h == nil {
		return nil
	}
	if got := hex.EncodeToString(c.h.Sum(nil)); got != c.etag {
		return fmt.Errorf("%s: %s of the download is %s, the hub's ETag says %s", c.what, c.kind, got, c.etag)
	}
	return nil
}
