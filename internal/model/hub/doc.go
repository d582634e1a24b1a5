// Package hub holds the rules for opening a model by its Hugging Face Hub
// id, hf:ORG/NAME[@REV] (or hf:ORG/NAME/FILE.gguf[@REV] for one llama.cpp
// file): parsing the id (Parse), the hub's URLs (APIURL, ResolveURL), the
// files a model needs among a repo's (Pick, then Shards from the index),
// and the check of a downloaded file against the hub's ETag (Check: the
// sha256 of an LFS file, the git blob sha1 of another).
//
// It is pure Go without the file system or net/http, so the page (web/ui)
// downloads into memory by the same rules; package download downloads into
// huggingface_hub's cache for the CLI.
package hub
