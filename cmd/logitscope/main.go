// Command logitscope captures and compares language-model logits.
//
//	logitscope mkmodel  --preset NAME [--tokenizer FILE] [--seed N] --out DIR
//	logitscope quantize [--model DIR] --scheme q8|q6|q4 [--out DIR]
//	logitscope capture  [--model DIR|F.gguf] [--variant f32|q8|q6|q4|DIR|F.gguf] [--system S] [--max-new N] [--stop ID ...]
//	                    [--prompt-ids FILE|-] [--dry-run] --dump-logits FILE (PROMPT | --panel FILE [--window N])
//	logitscope report   --ref A --test B [--json] [--close-margin K] [--close-logits L] [--global-sigma] [--tokenizer FILE]
//	logitscope tokenize [--tokenizer FILE | --model DIR|F.gguf] [--chat] [--system S] < lines
//	logitscope conform  --suite FILE [--junit FILE] [--out DIR] [--shard i/n] [--engine FILE] [--runtime wasm|native]
//
// Wherever --model takes a directory it takes a Hugging Face Hub id too,
// hf:ORG/NAME[@REV] (or hf:ORG/NAME/FILE.gguf[@REV]): package hub downloads
// it into the hub cache first (HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE,
// HF_HUB_OFFLINE as huggingface_hub reads them).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"logitscope/tempfile"
)

var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"mkmodel":  mkmodel,
	"capture":  captureCommand,
	"tokenize": tokenize,
	"quantize": quantize,
	"report":   report,
	"conform":  conformCommand,
	"export":   export,
}

func main() { os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr)) }

// cli runs the command args name and returns the exit status.
func cli(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 || commands[args[0]] == nil {
		fmt.Fprintln(stderr, "usage: logitscope mkmodel|quantize|capture|report|tokenize|conform|export [flags] (logitscope CMD -h for its flags)")
		return 2
	}
	defer onSignal(args[0], stderr)()
	if err := commands[args[0]](args[1:], stdout, stderr); err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintf(stderr, "logitscope %s: %v\n", args[0], err)
		}
		return 1
	}
	return 0
}

// onSignal makes a SIGINT or SIGTERM, until stop is called, remove the
// temporaries being written (tempfile.Abandon) and exit with 128+signal
// and a message. It exits from the handler rather than cancelling the
// command through a context: the engines have no points at which to
// stop, and the temporaries are all that a command interrupted at any
// point could leave, which the registry knows.
func onSignal(name string, stderr io.Writer) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			removed := tempfile.Abandon()
			slices.Sort(removed)
			msg := "nothing was half written"
			if len(removed) > 0 {
				msg = "removed the unfinished " + strings.Join(removed, ", ")
			}
			fmt.Fprintf(stderr, "logitscope %s: %v: %s\n", name, s, msg)
			code := 1
			if n, ok := s.(syscall.Signal); ok {
				code = 128 + int(n)
			}
			os.Exit(code)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}

// parse parses flags and positional arguments in any order, as people
// type them: `capture "Hi" --max-new 4` and `capture --max-new 4 "Hi"`.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// idList is a repeatable flag of token ids: `--stop 1 --stop 2`,
// `--stop 1,2`, and (see takeIDs) `--stop 1 2`.
type idList struct {
	ids []int
	set bool
}

func (l *idList) String() string { return fmt.Sprint(l.ids) }

func (l *idList) Set(s string) error {
	if !l.set {
		l.ids, l.set = nil, true // the first explicit value replaces the default
	}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		id, err := strconv.Atoi(f)
		if err != nil || id < 0 {
			return fmt.Errorf("%q is not a token id", f)
		}
		l.ids = append(l.ids, id)
	}
	return nil
}

// takeIDs rewrites `--flag 1 2 3` (argparse's nargs='+') as `--flag 1,2,3`
// so that the flag package sees one value. Only bare non-negative integers
// are taken, so a prompt that is a number must come before the flag.
func takeIDs(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		out = append(out, args[i])
		if args[i] != "-"+name && args[i] != "--"+name || i+1 >= len(args) {
			continue
		}
		vals := []string{args[i+1]}
		i++
		for i+1 < len(args) && isUint(args[i+1]) {
			vals = append(vals, args[i+1])
			i++
		}
		out = append(out, strings.Join(vals, ","))
	}
	return out
}

func isUint(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}
