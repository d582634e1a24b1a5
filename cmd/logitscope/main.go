// Command logitscope captures and compares language-model logits.
//
//	logitscope mkmodel  --preset NAME [--tokenizer FILE] [--seed N] --out DIR
//	logitscope quantize [--model DIR] --scheme q8|q6|q4 [--out DIR]
//	logitscope quantize [--model DIR] --format gptq [--bits N] [--group-size N] [--sym=false] [--desc-act] [--checkpoint-format gptq_v2] [--out DIR]
//	logitscope capture  [--model DIR|F.gguf] [--variant f32|q8|q6|q4|DIR|F.gguf] [--system S] [--max-new N] [--stop ID ...]
//	                    [--prompt-ids FILE|-] [--dry-run] [--inventory FILE] --dump-logits FILE (PROMPT | --panel FILE [--window N])
//	logitscope report   --ref A --test B [--json] [--close-margin K] [--close-logits L] [--global-sigma] [--tokenizer FILE]
//	logitscope tokenize [--tokenizer FILE | --model DIR|F.gguf] [--chat] [--system S] < lines
//	logitscope conform  --suite FILE [--junit FILE] [--out DIR] [--shard i/n] [--engine FILE] [--runtime wasm|native]
//	logitscope conform merge [--junit FILE] [--out DIR] SHARD_DIR...
//	logitscope export   [--model DIR] [--variant f32|q8|q6|q4|DIR] --gguf OUT.gguf
//	logitscope sensitivity [--model DIR] (--scheme q8|q6|q4 | --variant DIR|F.gguf) --panel FILE [--unit tensor|layer|kind] [--out FILE.json]
//	logitscope recipe   [--model DIR] --panel FILE (--target-bpw B | --target-size S) [--schemes q8,q6,q4] [--unit tensor|layer|kind] [--out DIR] [--json FILE]
//	logitscope verify   [--model DIR] [--variant NAME] [--panel FILE] CAPTURE_DIR[,DIR…]|DUMP
//	logitscope inventory [--model DIR]
//	logitscope panel    [--force] PANEL.jsonl
//
// Wherever --model takes a directory it takes a Hugging Face Hub id too,
// hf:ORG/NAME[@REV] (or hf:ORG/NAME/FILE.gguf[@REV]): package hub downloads
// it into the hub cache first (HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE,
// HF_HUB_OFFLINE as huggingface_hub reads them).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"logitscope/internal/sys/tempfile"
)

var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"mkmodel":     mkmodel,
	"capture":     captureCommand,
	"tokenize":    tokenize,
	"quantize":    quantize,
	"report":      report,
	"conform":     conformCommand,
	"export":      export,
	"sensitivity": sensitivityCommand,
	"recipe":      recipeCommand,
	"verify":      verifyCommand,
	"inventory":   inventoryCommand,
	"panel":       panelCommand,
}

// about says what each command does and how it is called, for the usage
// lines (apart from commands, which would otherwise refer to itself
// through the commands' newFlags).
var about = map[string]struct{ what, use string }{
	"mkmodel":  {"write a synthetic checkpoint", "logitscope mkmodel --preset NAME [--tokenizer FILE] [--seed N] --out DIR"},
	"quantize": {"write a quantized variant of a checkpoint", "logitscope quantize [--model DIR] --scheme q8|q6|q4 [--out DIR] [--only RE] [--keep RE] [--as RE=SCHEME ...]\n       logitscope quantize [--model DIR] --format gptq [--bits N] [--group-size N] [--sym=false] [--desc-act] [--checkpoint-format gptq|gptq_v2] [--out DIR]"},
	"capture":  {"run a request and dump every logit row", "logitscope capture [--model DIR|F.gguf] [--variant f32|q8|q6|q4|DIR|F.gguf] [flags] --dump-logits FILE (PROMPT | --panel FILE | --follow DUMP)"},
	"report":   {"what quantization did: KLD, flips, margins", "logitscope report --ref A --test B [--json] [--tokenizer FILE] [flags]"},
	"tokenize": {"token ids of lines of JSON strings", "logitscope tokenize [--tokenizer FILE | --model DIR|F.gguf] [--chat] [--system S] < lines"},
	"conform":  {"run a conformance suite, or merge its shards", "logitscope conform --suite FILE [--junit FILE] [--out DIR] [--shard i/n] [--runtime wasm|native]\n       logitscope conform merge [--junit FILE] [--out DIR] SHARD_DIR..."},
	"conform merge": {"combine the --out directories of a suite's shards (conform --shard i/n) into one summary, JUnit file and exit status",
		"logitscope conform merge [--junit FILE] [--out DIR] SHARD_DIR..."},
	"export": {"write a model or variant as a llama.cpp GGUF", "logitscope export [--model DIR] [--variant f32|q8|q6|q4|DIR] --gguf OUT.gguf"},
	"sensitivity": {"which matrices a quantization's damage comes from: sweeps, culprits of clear calls, divergence by layer",
		"logitscope sensitivity [--model DIR] (--scheme q8|q6|q4 | --variant DIR|F.gguf) --panel FILE [--unit tensor|layer|kind] [--out FILE.json]"},
	"verify":    {"check a capture's chain: its receipt, and the local checkpoint, variant and panel it names", "logitscope verify [--model DIR] [--variant NAME] [--panel FILE] CAPTURE_DIR[,DIR…]|DUMP"},
	"inventory": {"print the sealed inventory of a checkpoint's files (capture --inventory checks against it)", "logitscope inventory [--model DIR]"},
	"panel":     {"seal a .jsonl panel: its receipt beside it, checked by every later read", "logitscope panel [--force] PANEL.jsonl"},
	"recipe": {"a scheme per tensor within a size, from sweeps of each scheme: built, measured, and written for quantize and llama-quantize",
		"logitscope recipe [--model DIR] --panel FILE (--target-bpw B | --target-size S) [--schemes q8,q6,q4] [--unit tensor|layer|kind] [--out DIR] [--json FILE]"},
}

func main() { os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr)) }

// cli runs the command args name and returns the exit status: 0 when it
// (or the help asked for) succeeded, 1 when it failed, 2 when there was
// no command to run.
func cli(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stderr)
		return 2
	case isHelp(args[0]):
		usage(stdout)
		return 0
	case args[0] == "help" && len(args) > 1:
		args = []string{args[1], "-h"}
	case args[0] == "help":
		usage(stdout)
		return 0
	}
	run, ok := commands[args[0]]
	if !ok {
		msg := fmt.Sprintf("logitscope: unknown command %q", args[0])
		if near := nearest(args[0]); near != "" {
			msg += "; did you mean " + near + "?"
		}
		fmt.Fprintf(stderr, "%s\n(logitscope -h lists the commands)\n", msg)
		return 2
	}
	defer onSignal(args[0], stderr)()
	if err := run(args[1:], stdout, stderr); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintf(stderr, "logitscope %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// usage lists the commands.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: logitscope COMMAND [flags]   (logitscope COMMAND -h for its flags)")
	fmt.Fprintln(w, "\ncommands:")
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		fmt.Fprintf(w, "  %-9s %s\n", name, about[name].what)
	}
}

// nearest is the command a mistyped name most likely meant: within two
// edits, or one it is a prefix of; "" if none.
func nearest(name string) string {
	best, bestD := "", 3
	for _, c := range slices.Sorted(maps.Keys(commands)) {
		d := editDistance(name, c)
		if len(name) >= 3 && strings.HasPrefix(c, name) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// newFlags is a command's flag set. Its output is stdout, where -h prints
// the command's usage; parse errors are returned (parse), for cli to print
// on stderr.
func newFlags(name string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() {
		c := about[name]
		fmt.Fprintf(fs.Output(), "usage: %s\n\n%s.\n\nflags:\n", c.use, c.what)
		fs.PrintDefaults()
	}
	return fs
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
// -h prints the usage on the flag set's output (newFlags: stdout) and
// returns flag.ErrHelp; any other error is returned, not printed.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	help := fs.Output()
	fs.SetOutput(io.Discard) // the flag package prints errors with the usage
	defer fs.SetOutput(help)
	var pos []string
	for {
		err := fs.Parse(args)
		switch {
		case err == flag.ErrHelp:
			fs.SetOutput(help)
			fs.Usage()
			return nil, err
		case err != nil:
			return nil, fmt.Errorf("%w (logitscope %s -h lists its flags)", err, fs.Name())
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

// checkOutput refuses, before any work, an output file that is there: a
// device, FIFO or directory always, a regular file unless force says to
// replace it (tempfile.Rename refuses the first kind too, at the end).
func checkOutput(path string, force bool) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case st.Mode().IsRegular() || st.Mode()&os.ModeSymlink != 0:
		if force {
			return nil
		}
		return fmt.Errorf("%s exists: give --force to replace it", path)
	}
	return fmt.Errorf("%s: not a regular file (%v): an output is not written over it", path, st.Mode().Type())
}
