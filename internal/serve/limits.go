package serve

import (
	"net/http"
	"strconv"
	"time"
)

// Limits bound what a client can hold on the server: connections, time,
// upload slots and stored bytes. A zero field takes its default.
type Limits struct {
	// ReadHeader bounds reading a request's headers (default 10 s).
	ReadHeader time.Duration
	// Body bounds reading a whole request, body included (default 60 s):
	// a 16 MiB run must arrive at 280 KB/s or better. A body trickled in
	// a byte at a time is cut off here.
	Body time.Duration
	// Write bounds writing a response (default 60 s); a file's response
	// gets Write plus its size at MinRate, so a large shard can download
	// over a slow link while a client that stops reading is dropped.
	Write time.Duration
	// MinRate is the slowest download, in bytes per second, that the
	// write deadline allows for (default 256 KiB/s: a 1 GB shard gets
	// about 65 minutes).
	MinRate int64
	// Idle closes a keep-alive connection with no request (default 60 s).
	Idle time.Duration
	// Uploads is how many POST /api/runs may run at once (default 4);
	// past it the server answers 503 with Retry-After rather than queue
	// bodies in memory (each may be 16 MiB).
	Uploads int
	// MaxRuns and MaxStoreBytes bound the stored runs (default 10,000 runs
	// and 1 GiB); past either a new run is refused with 507.
	MaxRuns       int
	MaxStoreBytes int64
}

// maxExtraWrite caps extendWrite, which a huge size over a tiny MinRate
// would otherwise overflow.
const maxExtraWrite = 24 * time.Hour

// retryAfter is what a refused upload is told, in seconds.
const retryAfter = 5

func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadHeader, 10*time.Second)
	def(&l.Body, 60*time.Second)
	def(&l.Write, 60*time.Second)
	def(&l.Idle, 60*time.Second)
	if l.MinRate <= 0 {
		l.MinRate = 256 << 10
	}
	if l.Uploads <= 0 {
		l.Uploads = 4
	}
	if l.MaxRuns <= 0 {
		l.MaxRuns = 10000
	}
	if l.MaxStoreBytes <= 0 {
		l.MaxStoreBytes = 1 << 30
	}
	return l
}

// HTTPServer is an http.Server for s with its Limits' timeouts. Use it (or
// copy its timeouts): without them a client can hold a connection forever.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.lim.ReadHeader,
		ReadTimeout:       s.lim.Body,
		WriteTimeout:      s.lim.Write,
		IdleTimeout:       s.lim.Idle,
	}
}

// extendWrite gives a response of size bytes time to download at MinRate,
// on top of the Write floor the server set when the request arrived. It
// is best effort: a ResponseWriter without deadlines (a test recorder)
// has nothing to extend.
func (s *Server) extendWrite(w http.ResponseWriter, size int64) {
	extra := time.Duration(min(float64(size)/float64(s.lim.MinRate), maxExtraWrite.Seconds()) * float64(time.Second))
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.lim.Write + extra))
}

// takeUpload claims an upload slot; when none is free it answers 503 with
// Retry-After and reports false. release gives the slot back.
func (s *Server) takeUpload(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case s.uploads <- struct{}{}:
		return func() { <-s.uploads }, true
	default:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		http.Error(w, "too many uploads at once: try again in a few seconds", http.StatusServiceUnavailable)
		return nil, false
	}
}
