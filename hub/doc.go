// Package hub opens a model by its Hugging Face Hub id, hf:ORG/NAME[@REV]
// (or hf:ORG/NAME/FILE.gguf[@REV] for one llama.cpp file), as
// huggingface_hub's hf_hub_download does: it asks the hub's API which
// commit REV names and which files the repo holds (Pick chooses the few a
// model needs), downloads each through the hub's resolve URL into the
// standard cache (Cache: models--ORG--NAME/blobs/<etag>, snapshots/<commit>/
// FILE linked to its blob, refs/<REV> holding the commit), resuming a
// partial blob with a Range request and checking every file against the
// hub's ETag (Check: the sha256 of an LFS file, the git blob sha1 of
// another). A snapshot already complete in the cache opens with no network
// when the revision is a commit, with HF_HUB_OFFLINE=1, or when the hub
// cannot be reached.
//
// The id parser, Pick and Check are pure Go without the file system, so the
// page (web/ui) downloads into memory with the same rules.
package hub
