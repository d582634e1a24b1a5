package serve

import (
	"fmt"
	"net/http"
	"time"
)

// loggedWriter counts what a response sent, for the access log.
type loggedWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (l *loggedWriter) WriteHeader(code int) {
	if l.status == 0 {
		l.status = code
	}
	l.ResponseWriter.WriteHeader(code)
}

func (l *loggedWriter) Write(b []byte) (int, error) {
	if l.status == 0 {
		l.status = http.StatusOK
	}
	n, err := l.ResponseWriter.Write(b)
	l.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's deadlines
// (extendWrite) and flusher through the wrapper.
func (l *loggedWriter) Unwrap() http.ResponseWriter { return l.ResponseWriter }

// accessLine is one request as an operator reads it: client, method,
// path, status, bytes sent and duration. The path only: a query may carry
// a link's prompt, and no header is ever logged (the write token is one).
func accessLine(client, method, path string, status int, bytes int64, d time.Duration) string {
	if status == 0 {
		status = http.StatusOK // a handler that wrote nothing answered 200
	}
	return fmt.Sprintf("%s %s %q %d %dB %s", client, method, path, status, bytes, d.Round(time.Microsecond))
}
