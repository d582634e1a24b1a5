package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/analysis/snapshot"
)

const (
	// maxRunBytes bounds a shared run: a snapshot of a few thousand
	// positions' top-k fits with room to spare, and the server reads the
	// whole body into memory to hash it before storing.
	maxRunBytes = snapshot.MaxBytes
	// idLen hex digits of sha256 (128 bits) name a run: short enough for a
	// link, far too long to guess or to collide by accident.
	idLen = 32
)

// runKind: a run is content-addressed, so it never changes under its URL.
// snapshotVersion is the version as package snapshot writes it.
var snapshotVersion = strconv.Itoa(snapshot.Version)

var runKind = kind{contentType: "application/json", immutable: true, compress: true}

// runsDir creates data/runs and returns it with its symlinks resolved.
func runsDir(data string) (string, error) {
	dir := filepath.Join(data, "runs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return realDir(dir)
}

// validID accepts exactly idLen lowercase hex digits, so that an id can
// never name anything but a run file (no dots, no separators, no case
// aliases on case-insensitive file systems).
func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for _, c := range []byte(id) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func runID(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])[:idLen]
}

// postRun stores the body as a shared run and replies its id, page path
// and link: 201 when it is new, 200 when the same bytes were stored
// before. A read-only server, or one with a write token the request does
// not carry, refuses it (mayWrite) before reading the body.
func (s *Server) postRun(w http.ResponseWriter, r *http.Request) {
	if s.runs == "" {
		http.Error(w, "shared runs are disabled: start the server with -data DIR", http.StatusServiceUnavailable)
		return
	}
	if !s.mayWrite(w, r) {
		return
	}
	// Only JSON: a form on another site can POST text/plain or a form
	// encoding without asking (no CORS preflight), but not application/json.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, fmt.Sprintf("Content-Type %q: a run must be sent as application/json", r.Header.Get("Content-Type")), http.StatusUnsupportedMediaType)
		return
	}
	release, ok := s.takeUpload(w)
	if !ok {
		return
	}
	defer release()
	body, ok := readRun(w, r)
	if !ok {
		return
	}
	id := runID(body)
	created, err := s.storeRun(id, body)
	var full *storeFullError
	if errors.As(err, &full) {
		s.logf("serve: run %s refused: %v", id, err)
		http.Error(w, err.Error(), http.StatusInsufficientStorage)
		return
	}
	if err != nil {
		s.logf("serve: storing run %s: %v", id, err)
		http.Error(w, "could not store the run", http.StatusInternalServerError)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/api/runs/"+id)
	}
	// url is the page's path, link the whole address to hand a teammate.
	s.writeJSON(w, status, "no-store", map[string]string{"id": id, "url": "/r/" + id, "link": s.origin(r) + "/r/" + id})
}

// readRun reads a POSTed run and checks it; when it says !ok it has
// already replied 413 or 400 with a message that says what is wrong.
func readRun(w http.ResponseWriter, r *http.Request) (body []byte, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRunBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		http.Error(w, fmt.Sprintf("run too large: the limit is %d MiB", maxRunBytes>>20), http.StatusRequestEntityTooLarge)
	case err != nil:
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
	default:
		if err = checkSnapshot(body); err == nil {
			return body, true
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
	return nil, false
}

// checkSnapshot accepts a JSON object whose kind and version this server
// knows and that the page will show at /r/<id>: a run's document that
// snapshot.Parse takes, or a sweep or a recipe (package attribution)
// sealed over its content, as the CLI wrote it.
func checkSnapshot(body []byte) error {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return fmt.Errorf("the body is a JSON %s; want an object", typeErr.Value)
		}
		return fmt.Errorf("the body is not JSON: %v", err)
	}
	if doc == nil {
		return errors.New("the body is JSON null; want an object")
	}
	var kind string
	if raw, ok := doc["kind"]; !ok {
		return fmt.Errorf(`"kind" is missing; want %q`, snapshot.Kind)
	} else if json.Unmarshal(raw, &kind) == nil && (kind == attribution.Kind || kind == attribution.RecipeKind) {
		_, _, err := attribution.Parse(body, "the body")
		return err
	} else if kind != snapshot.Kind {
		return fmt.Errorf(`"kind" is %s; want %q (or a sweep's %q, a recipe's %q)`, clip(raw), snapshot.Kind, attribution.Kind, attribution.RecipeKind)
	}
	// Compared as written: "1" only, not 1.0 or "1", as package snapshot
	// writes it.
	if raw, ok := doc["version"]; !ok {
		return fmt.Errorf(`"version" is missing; want %s`, snapshotVersion)
	} else if string(raw) != snapshotVersion {
		return fmt.Errorf(`"version" is %s; this server stores version %s`, clip(raw), snapshotVersion)
	}
	_, err := snapshot.Parse(body)
	return err
}

// clip keeps an echoed value short: it may be a megabyte-sized object.
func clip(raw []byte) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	return string(raw)
}

// storeRun writes body to runs/<id>.json unless it is there already. The
// bytes go to a hidden temp file in the same directory, are synced, and
// are renamed into place, so a reader (or a crash) never sees a partial
// run. runMu makes "already there" exact within this process; another
// process sharing the directory may rename the same bytes over it, which
// is harmless since the name is their hash.
func (s *Server) storeRun(id string, body []byte) (created bool, err error) {
	final := filepath.Join(s.runs, id+".json")
	if _, err := os.Stat(final); err == nil {
		return false, nil
	}
	if err := s.roomFor(len(body)); err != nil {
		return false, err // before writing: a full store takes no more temp files
	}
	tmp, err := writeTemp(s.runs, ".tmp-"+id+"-*", body)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp) // a no-op once renamed
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if _, err := os.Stat(final); err == nil {
		return false, nil
	}
	if err := s.stored.room(len(body), s.lim); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, final); err != nil {
		return false, err
	}
	s.stored.add(len(body))
	// Best effort: some file systems cannot sync a directory, and the run
	// is stored and readable either way.
	if err := syncDir(s.runs); err != nil {
		s.logf("serve: run %s: syncing %s: %v", id, s.runs, err)
	}
	return true, nil
}

// runStore is what runs/ holds: runs and their bytes.
type runStore struct {
	runs  int
	bytes int64
}

func (st *runStore) add(n int) { st.runs, st.bytes = st.runs+1, st.bytes+int64(n) }

// storeFullError is a run refused because the store is at its limits.
// Runs are never evicted: a run's link is meant to keep working, and the
// server cannot know which links are still in use. The operator raises
// the limits or deletes runs by hand.
type storeFullError struct{ msg string }

func (e *storeFullError) Error() string { return e.msg }

// room says whether a run of n bytes fits within lim.
func (st runStore) room(n int, lim Limits) error {
	switch {
	case st.runs+1 > lim.MaxRuns:
		return &storeFullError{fmt.Sprintf("the run store is full: %d runs stored, the limit is %d", st.runs, lim.MaxRuns)}
	case st.bytes+int64(n) > lim.MaxStoreBytes:
		return &storeFullError{fmt.Sprintf("the run store is full: %d bytes stored, this run's %d would pass the limit of %d bytes (%.1f MiB)",
			st.bytes, n, lim.MaxStoreBytes, float64(lim.MaxStoreBytes)/(1<<20))}
	}
	return nil
}

func (s *Server) roomFor(n int) error {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	return s.stored.room(n, s.lim)
}

// measureRuns counts the runs already in dir, so the limits hold across
// restarts. Temp files left by a crash are hidden and not counted.
func measureRuns(dir string) (runStore, error) {
	var st runStore
	entries, err := os.ReadDir(dir)
	if err != nil {
		return st, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") || filepath.Ext(e.Name()) != ".json" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return st, err
		}
		st.add(int(info.Size()))
	}
	return st, nil
}

// writeTemp writes data to a new file in dir and syncs it to disk.
func writeTemp(dir, pattern string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// syncDir makes a rename durable: without it a crash can lose the new
// directory entry even though the file's bytes were synced.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// serveRun serves a stored run; a malformed id is a 404 like a missing one.
func (s *Server) serveRun(w http.ResponseWriter, r *http.Request, id string) {
	if s.runs == "" || !validID(id) {
		s.notFound(w, r, errors.New("no such run"))
		return
	}
	s.serveFile(w, r, s.runs, id+".json", runKind)
}

// serveRunPage serves the page for a run that exists, so that a mistyped
// link fails at once rather than after the page has loaded.
func (s *Server) serveRunPage(w http.ResponseWriter, r *http.Request, id string) {
	if s.runs == "" || !validID(id) || !s.runExists(id) {
		// A person followed a link: a page that says what happened and
		// where to go, not Go's bare "404 page not found".
		s.logf("serve: 404 %s %q: no such run", r.Method, r.RequestURI)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, runNotFound, html.EscapeString(id))
		return
	}
	s.servePage(w, r)
}

// runNotFound is the page of a /r/<id> link that names no stored run.
const runNotFound = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>logitscope: no such shared run</title></head>
<body><h1>No shared run %s here</h1>
<p>This server has no snapshot under that id: the link may be cut short or mistyped, or the run
was shared on another logitscope server.</p>
<p><a href="/">Open logitscope</a> to run a comparison.</p></body></html>
`

// runExists applies serveRun's own checks (regular file, inside runs/).
func (s *Server) runExists(id string) bool {
	f, _, err := openUnder(s.runs, id+".json")
	if err != nil {
		return false
	}
	f.Close()
	return true
}
