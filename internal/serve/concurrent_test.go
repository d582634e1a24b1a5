package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestConcurrentRanges has 32 clients read random ranges of one shard over
// loopback at once; the first requests also race to compute its ETag.
func TestConcurrentRanges(t *testing.T) {
	f := newFixture(t)
	data := read(t, f.shard)
	ts := httptest.NewServer(f.srv) // binds 127.0.0.1
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	const clients, perClient = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	etags := make(chan string, clients*perClient)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for range perClient {
				from := rng.IntN(len(data))
				to := from + rng.IntN(min(4096, len(data)-from))
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+shardURL, nil)
				req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", from, to))
				resp, err := ts.Client().Do(req)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, data[from:to+1]) {
					errs <- fmt.Errorf("bytes=%d-%d: status %d, %d bytes, err %v", from, to, resp.StatusCode, len(got), err)
					return
				}
				etags <- resp.Header.Get("ETag")
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(etags)
	for err := range errs {
		t.Error(err)
	}
	first := <-etags
	for e := range etags {
		if e != first {
			t.Fatalf("ETags differ: %q and %q", first, e)
		}
	}
}
