package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Share posts a document (a snapshot, a sweep or a recipe) to the
// logitscope server at base (http(s)://host[:port]) and returns the link
// that opens it: the server's own link, which names its public URL. token,
// if not empty, is sent as the write token. A refusal is an error that
// quotes the server's reason.
func Share(ctx context.Context, base, token string, doc []byte) (string, error) {
	base = strings.TrimSuffix(base, "/")
	if _, err := PublicURL(base); err != nil {
		return "", fmt.Errorf("share: server %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/runs", bytes.NewReader(doc))
	if err != nil {
		return "", fmt.Errorf("share: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set(TokenHeader, "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("share: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("share: reading %s's reply: %v", base, err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("share: %s refused the snapshot: %s: %s", base, resp.Status, strings.TrimSpace(string(body)))
	}
	var reply struct{ URL, Link string }
	if err := json.Unmarshal(body, &reply); err != nil || !strings.HasPrefix(reply.URL, "/r/") {
		return "", fmt.Errorf("share: %s's reply %q is not a logitscope server's", base, clip(body))
	}
	if reply.Link != "" {
		return reply.Link, nil
	}
	return base + reply.URL, nil
}
