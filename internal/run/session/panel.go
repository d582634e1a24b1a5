package session

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"logitscope/internal/format/kldbase"
	"logitscope/internal/text/tokenizer"
)

// ReadPanel reads teacher-forced windows: JSON lines of token ids ([1, 2]
// or {"ids": [1, 2]}) when path ends in .jsonl, taken as they are, else a
// text that is tokenized whole and cut into windows of n tokens that each
// start with prefix (see Windows), or llama.cpp's --kl-divergence-base
// file, whose chunks are the windows, each run as llama.cpp runs it: its
// first token replaced by the prefix's BOS when there is one.
func ReadPanel(path string, tok *tokenizer.Tokenizer, n int, prefix []int) ([][]int, error) {
	if kldbase.Is(path) {
		f, err := kldbase.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return f.Windows(prefix), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var windows [][]int
	if strings.HasSuffix(path, ".jsonl") {
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for line := 1; sc.Scan(); line++ {
			text := strings.TrimSpace(sc.Text())
			if text == "" {
				continue
			}
			ids, err := parseIDs(text)
			if err != nil {
				return nil, fmt.Errorf("%s: line %d: %v", path, line, err)
			}
			for _, id := range ids {
				if id < 0 { // a token id indexes the vocabulary
					return nil, fmt.Errorf("%s: line %d: token id %d is negative", path, line, id)
				}
			}
			if len(ids) < 2 {
				return nil, fmt.Errorf("%s: line %d: a window needs at least 2 tokens, got %d", path, line, len(ids))
			}
			windows = append(windows, ids)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
	} else {
		windows = Windows(tok.Encode(string(data)), n, prefix)
	}
	if len(windows) == 0 {
		return nil, fmt.Errorf("%s: no window of at least 2 tokens", path)
	}
	return windows, nil
}

func parseIDs(text string) ([]int, error) {
	var ids []int
	if err := json.Unmarshal([]byte(text), &ids); err == nil {
		return ids, nil
	}
	var obj struct {
		IDs []int `json:"ids"`
	}
	if err := json.Unmarshal([]byte(text), &obj); err != nil || obj.IDs == nil {
		return nil, fmt.Errorf(`want [ids...] or {"ids": [...]}, got %.40q`, text)
	}
	return obj.IDs, nil
}
