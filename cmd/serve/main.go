// Command serve serves logitscope's models (and, later, its page) over HTTP.
//
//	go run ./cmd/serve [-addr 127.0.0.1:8080] [-models DIR] [-data DIR] [-static DIR]
//
// Without -models it serves the built-in demo model (the tiny preset with
// q8, q6 and q4 variants, generated once) as "demo".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"logitscope/serve"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "logitscope serve:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	modelsDir := flag.String("models", "", "directory whose subdirectories are checkpoints (default: the built-in demo)")
	dataDir := flag.String("data", "", "directory for shared runs (reserved; not served yet)")
	static := flag.String("static", "", "directory of the page: / serves index.html, /static/ its files")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	if *dataDir != "" {
		if st, err := os.Stat(*dataDir); err != nil || !st.IsDir() {
			return fmt.Errorf("-data %s: not a directory", *dataDir)
		}
	}

	models, err := loadModels(*modelsDir)
	if err != nil {
		return err
	}
	h, err := serve.New(serve.Options{Models: models, Static: *static})
	if err != nil {
		return err
	}

	// Listen before printing the URL, so the URL printed is one that works
	// (and names the real port when -addr asks for port 0).
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	fmt.Printf("logitscope serve: http://%s/ (models: %s)\n", ln.Addr(), strings.Join(names, ", "))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Println("logitscope serve: shutting down")
	// A shard download in flight gets a few seconds to finish.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func loadModels(dir string) ([]*serve.Model, error) {
	if dir == "" {
		demo, err := serve.PrepareDemo(os.Stdout)
		if err != nil {
			return nil, err
		}
		m, err := serve.LoadModel("demo", demo, log.Printf)
		if err != nil {
			return nil, err
		}
		return []*serve.Model{m}, nil
	}
	models, err := serve.ScanModels(dir, log.Printf)
	if err != nil {
		return nil, err
	}
	if len(models) == 0 {
		return nil, fmt.Errorf("-models %s: no subdirectory holds a config.json", dir)
	}
	return models, nil
}
