// harness: llama.cpp's own libraries behind a small command line, so that Go
// tests can compare logitscope against them. Package llamacpp compiles this
// file with cc against the prebuilt libraries of the npm package
// @node-llama-cpp/linux-x64 and runs it once per request.
//
// Protocol: the subcommand and its scalar arguments come on the command
// line; bulk data crosses stdin and stdout as raw little-endian values; a
// failure exits non-zero with its reason on stderr.
//
//   types                          one line per type: id name block_size block_bytes
//   dequantize TYPE N              stdin: the blocks of N weights; stdout: N float32
//   quantize TYPE ROWS COLS [imatrix]
//                                  stdin: ROWS*COLS float32 (after COLS float32 of
//                                  importance with "imatrix"); stdout: the blocks
//   quantize-model IN OUT FTYPE [REGEX=TYPE ...]
//                                  llama_model_quantize with the default parameters
//                                  and llama-quantize's --tensor-type overrides
//   ftypes                         the FTYPE names, one a line
//   logits MODEL N F32KV THREADS   stdin: N int32 token ids; stdout: int32 n_vocab,
//                                  then N rows of n_vocab float32 (teacher forced)
//   tiny-model OUT SEED            a small random Llama GGUF (f32 weights, no vocabulary)
//   serve MODEL GPU THREADS CTX BATCH UBATCH FLASH TYPE_K TYPE_V
//                                  one sequence kept open across requests (see
//                                  cmd_serve): stdout first carries int32 n_vocab,
//                                  int32 length and that many bytes of key=value
//                                  lines (the settings as the context took them);
//                                  then each stdin request gets its answer
//   bench MODEL N GEN THREADS REPS GPU
//                                  stdin: N int32 prompt ids; stdout: one line,
//                                  prefill tok/s, decode tok/s, peak RSS bytes,
//                                  warm-up seconds, then the device's name and
//                                  description (GPU 1: every layer on the
//                                  first GPU device ggml has; 0: the CPU)

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "gguf.h"
#include "llama.h"

static const char *bins_dir; // where the ggml-cpu variants are, argv[1]

static void die(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fputs("harness: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static long parse_int(const char *s, const char *what) {
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s) die("%s: not an integer: %s", what, s);
	return v;
}

// read_all reads stdin to its end.
static unsigned char *read_all(size_t *n) {
	size_t cap = 1 << 16, len = 0;
	unsigned char *buf = malloc(cap);
	if (!buf) die("out of memory");
	for (;;) {
		if (len == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf) die("out of memory");
		}
		size_t got = fread(buf + len, 1, cap - len, stdin);
		len += got;
		if (got == 0) {
			if (ferror(stdin)) die("reading stdin: %s", strerror(errno));
			break;
		}
	}
	*n = len;
	return buf;
}

static void write_all(const void *p, size_t n) {
	if (fwrite(p, 1, n, stdout) != n) die("writing stdout: %s", strerror(errno));
}

// type_arg checks a ggml_type number from the command line: in range and
// with a fixed block layout (removed types have block size 0).
static enum ggml_type type_arg(const char *s) {
	long t = parse_int(s, "type");
	if (t < 0 || t >= GGML_TYPE_COUNT) die("type %ld out of range [0, %d)", t, GGML_TYPE_COUNT);
	if (ggml_blck_size((enum ggml_type)t) == 0) die("type %ld has no block layout", t);
	return (enum ggml_type)t;
}

static int cmd_types(void) {
	for (int t = 0; t < GGML_TYPE_COUNT; t++) {
		const struct ggml_type_traits *tr = ggml_get_type_traits((enum ggml_type)t);
		if (tr->blck_size == 0) continue; // a removed type's hole in the enum
		printf("%d %s %lld %zu\n", t, tr->type_name, (long long)tr->blck_size, tr->type_size);
	}
	return 0;
}

// cmd_dequantize runs the type's to_float, which for the quantized types is
// ggml-base's reference dequantize_row_* (the CPU backend's SIMD versions
// live in the ggml-cpu libraries, which this never calls).
static int cmd_dequantize(const char *type, const char *count) {
	enum ggml_type t = type_arg(type);
	long n = parse_int(count, "count");
	const struct ggml_type_traits *tr = ggml_get_type_traits(t);
	if (n < 0 || n % tr->blck_size) die("%s: %ld weights are not whole %lld-weight blocks", tr->type_name, n, (long long)tr->blck_size);
	size_t want = ggml_row_size(t, n), got;
	unsigned char *in = read_all(&got);
	if (got != want) die("%s: %ld weights need %zu bytes, stdin had %zu", tr->type_name, n, want, got);
	float *out = malloc(n * sizeof(float) + 1);
	if (!out) die("out of memory");
	if (t == GGML_TYPE_F32) {
		memcpy(out, in, want);
	} else if (tr->to_float) {
		tr->to_float(in, out, n);
	} else {
		die("%s has no to_float", tr->type_name);
	}
	write_all(out, n * sizeof(float));
	return 0;
}

// cmd_quantize runs ggml_quantize_chunk; with an importance matrix (one
// float32 per column, first on stdin) when imatrix is set, which the
// lowest-bit i-quants require.
static int cmd_quantize(const char *type, const char *rows_s, const char *cols_s, int imatrix) {
	enum ggml_type t = type_arg(type);
	long rows = parse_int(rows_s, "rows"), cols = parse_int(cols_s, "cols");
	const struct ggml_type_traits *tr = ggml_get_type_traits(t);
	if (rows < 0 || cols < 0 || cols % tr->blck_size) die("%s: rows of %ld weights are not whole %lld-weight blocks", tr->type_name, cols, (long long)tr->blck_size);
	if (!imatrix && ggml_quantize_requires_imatrix(t)) die("%s needs an importance matrix", tr->type_name);
	if (t != GGML_TYPE_F32 && t != GGML_TYPE_F16 && t != GGML_TYPE_BF16 && !tr->is_quantized) die("%s is not a quantized type", tr->type_name);
	size_t got, head = imatrix ? (size_t)cols : 0;
	float *all = (float *)read_all(&got);
	if (got != ((size_t)rows * cols + head) * sizeof(float)) die("%ld x %ld float32 (and %zu of importance) are %zu bytes, stdin had %zu", rows, cols, head, ((size_t)rows * cols + head) * sizeof(float), got);
	float *in = all + head;
	size_t size = ggml_row_size(t, cols) * rows;
	void *out = malloc(size + 1);
	if (!out) die("out of memory");
	size_t wrote = ggml_quantize_chunk(t, in, out, 0, rows, cols, imatrix ? all : NULL);
	if (wrote != size) die("ggml_quantize_chunk wrote %zu bytes, want %zu", wrote, size);
	write_all(out, size);
	return 0;
}

// ftypes names llama.h's file types the way llama-quantize's command line
// does; the values come from the header, not from this table.
static const struct {
	const char *name;
	enum llama_ftype ftype;
} ftypes[] = {
	{"F32", LLAMA_FTYPE_ALL_F32},         {"F16", LLAMA_FTYPE_MOSTLY_F16},
	{"BF16", LLAMA_FTYPE_MOSTLY_BF16},    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},
	{"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},    {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
	{"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},    {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
	{"Q2_K", LLAMA_FTYPE_MOSTLY_Q2_K},    {"Q2_K_S", LLAMA_FTYPE_MOSTLY_Q2_K_S},
	{"Q3_K_S", LLAMA_FTYPE_MOSTLY_Q3_K_S}, {"Q3_K_M", LLAMA_FTYPE_MOSTLY_Q3_K_M},
	{"Q3_K_L", LLAMA_FTYPE_MOSTLY_Q3_K_L}, {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S},
	{"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S},
	{"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
	{"TQ1_0", LLAMA_FTYPE_MOSTLY_TQ1_0},  {"TQ2_0", LLAMA_FTYPE_MOSTLY_TQ2_0},
	{"IQ4_NL", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"IQ4_XS", LLAMA_FTYPE_MOSTLY_IQ4_XS},
	{"IQ3_S", LLAMA_FTYPE_MOSTLY_IQ3_S},  {"IQ3_M", LLAMA_FTYPE_MOSTLY_IQ3_M},
	{"MXFP4_MOE", LLAMA_FTYPE_MOSTLY_MXFP4_MOE},
};

static int cmd_ftypes(void) {
	for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++) puts(ftypes[i].name);
	return 0;
}

// flash_resolved is what llama.cpp made of flash attention "auto" for the
// context being created: it says so only in its log (-1: not said).
static int flash_resolved = -1;

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
	(void)user;
	if (strstr(text, "Flash Attention enabled")) flash_resolved = 1;
	if (strstr(text, "Flash Attention not supported")) flash_resolved = 0;
	if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN || getenv("LLAMACPP_HARNESS_VERBOSE"))
		fputs(text, stderr);
}

// init loads the CPU backend: llama.cpp's prebuilt CPU code comes as one
// library per instruction set (libggml-cpu-haswell.so, ...-zen4.so, ...),
// and ggml picks the best one this machine runs when it loads them all.
static void init(void) {
	llama_log_set(quiet_log, NULL);
	ggml_backend_load_all_from_path(bins_dir);
	if (ggml_backend_dev_count() == 0) die("no ggml backend loaded from %s", bins_dir);
	llama_backend_init();
}

// type_named is the ggml type whose name is name, as llama-quantize's
// --tensor-type reads it (any case).
static enum ggml_type type_named(const char *name) {
	for (int t = 0; t < GGML_TYPE_COUNT; t++) {
		const char *n = ggml_type_name((enum ggml_type)t);
		if (n && !strcasecmp(n, name)) return (enum ggml_type)t;
	}
	die("unknown ggml type %s", name);
	return GGML_TYPE_COUNT;
}

// cmd_quantize_model is llama-quantize IN OUT FTYPE with each override
// REGEX=TYPE as its --tensor-type: the array llama.h's tt_overrides
// takes, ended by a NULL pattern.
static int cmd_quantize_model(const char *in, const char *out, const char *name, char **overrides, int n) {
	init();
	struct llama_model_quantize_params p = llama_model_quantize_default_params();
	size_t i;
	for (i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
		if (!strcmp(ftypes[i].name, name)) break;
	if (i == sizeof ftypes / sizeof ftypes[0]) die("unknown ftype %s", name);
	p.ftype = ftypes[i].ftype;
	struct llama_model_tensor_override *tt = calloc(n + 1, sizeof *tt);
	if (!tt) die("out of memory");
	for (int k = 0; k < n; k++) {
		char *eq = strrchr(overrides[k], '=');
		if (!eq || eq == overrides[k]) die("tensor type %s: want REGEX=TYPE", overrides[k]);
		*eq = 0;
		tt[k].pattern = overrides[k];
		tt[k].type = type_named(eq + 1);
	}
	tt[n].pattern = NULL;
	tt[n].type = GGML_TYPE_COUNT;
	if (n > 0) p.tt_overrides = tt;
	if (llama_model_quantize(in, out, &p) != 0) die("llama_model_quantize %s -> %s (%s) failed", in, out, name);
	free(tt);
	return 0;
}

static int cmd_logits(const char *path, const char *count, const char *f32kv, const char *threads_s) {
	long n = parse_int(count, "count"), threads = parse_int(threads_s, "threads");
	if (n <= 0) die("no tokens");
	size_t got;
	int32_t *ids = (int32_t *)read_all(&got);
	if (got != (size_t)n * 4) die("%ld token ids are %ld bytes, stdin had %zu", n, n * 4, got);
	init();

	struct llama_model_params mp = llama_model_default_params();
	mp.n_gpu_layers = 0;
	struct llama_model *model = llama_model_load_from_file(path, mp);
	if (!model) die("cannot load %s", path);
	int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
	for (long i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= n_vocab) die("token %ld: id %d outside the vocabulary of %d", i, ids[i], n_vocab);

	// Teacher forcing: every position is computed and returns its row.
	// Batches of at most 512 keep the compute buffers of a large
	// vocabulary small; the KV cache carries the context across them.
	long chunk = n < 512 ? n : 512;
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = (uint32_t)n;
	cp.n_batch = cp.n_ubatch = (uint32_t)chunk;
	cp.n_seq_max = 1;
	cp.no_perf = true;
	if (threads > 0) cp.n_threads = cp.n_threads_batch = (int32_t)threads;
	if (parse_int(f32kv, "f32kv")) {
		// With flash attention (which "auto" turns on for the CPU) llama.cpp
		// casts an f32 K and V to f16 before attending, so an f32 cache
		// alone changes nothing: attention is float32 only without it.
		cp.type_k = cp.type_v = GGML_TYPE_F32;
		cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
	}
	struct llama_context *ctx = llama_init_from_model(model, cp);
	if (!ctx) die("cannot create a context of %ld tokens", n);

	write_all(&n_vocab, sizeof n_vocab);
	struct llama_batch batch = llama_batch_init((int32_t)chunk, 0, 1);
	for (long start = 0; start < n; start += chunk) {
		long m = n - start < chunk ? n - start : chunk;
		batch.n_tokens = (int32_t)m;
		for (long i = 0; i < m; i++) {
			batch.token[i] = ids[start + i];
			batch.pos[i] = (llama_pos)(start + i);
			batch.n_seq_id[i] = 1;
			batch.seq_id[i][0] = 0;
			batch.logits[i] = 1;
		}
		int rc = llama_decode(ctx, batch);
		if (rc != 0) die("llama_decode at position %ld: %d", start, rc);
		for (long i = 0; i < m; i++) {
			const float *row = llama_get_logits_ith(ctx, (int32_t)i);
			if (!row) die("no logits at position %ld", start + i);
			write_all(row, (size_t)n_vocab * sizeof(float));
		}
	}
	llama_batch_free(batch);
	llama_free(ctx);
	llama_model_free(model);
	return 0;
}

// read_exact fills p from stdin; 0 at a clean end of input before any byte.
static int read_exact(void *p, size_t n) {
	size_t got = fread(p, 1, n, stdin);
	if (got == 0 && n > 0 && feof(stdin)) return 0;
	if (got != n) die("reading a request: %zu of %zu bytes", got, n);
	return 1;
}

// gpu_device is the first GPU (or integrated GPU) device ggml loaded, or
// dies: asked for "all GPUs", llama.cpp with none silently runs on the CPU.
static ggml_backend_dev_t gpu_device(void) {
	ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
	if (!dev) dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_IGPU);
	if (!dev)
		die("no GPU device among ggml's backends in %s (llama.cpp's Vulkan skips CPU-type devices such as "
		    "lavapipe unless GGML_VK_VISIBLE_DEVICES=0; is a Vulkan driver installed?)", bins_dir);
	return dev;
}

// load_model loads path on the CPU or, with on_gpu, with every layer on
// the first GPU device (gpu_device), which *dev names: one device, named,
// because asked for "all GPUs" llama.cpp with no GPU device silently runs
// on the CPU, which would make a Vulkan row a second CPU row.
static struct llama_model *load_model(const char *path, long on_gpu, ggml_backend_dev_t *dev) {
	static ggml_backend_dev_t devs[2];
	struct llama_model_params mp = llama_model_default_params();
	mp.n_gpu_layers = 0;
	*dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
	if (on_gpu) {
		*dev = devs[0] = gpu_device();
		mp.devices = devs;
		mp.n_gpu_layers = 999;
	}
	struct llama_model *model = llama_model_load_from_file(path, mp);
	if (!model) die("cannot load %s", path);
	return model;
}

// cmd_serve keeps one sequence of one context open and answers requests
// on stdin, so that a capture drives llama.cpp chunk by chunk as it drives
// logitscope's engines (the same chunks, the same positions):
//
//   int32 0                          reset: empty the KV cache, back to position 0;
//                                    answer int32 0
//   int32 1, int32 WANT, int32 N, N int32 ids
//                                    decode the ids at the next N positions as one
//                                    llama_decode (N <= BATCH); WANT 0: no row, 1:
//                                    the last token's, 2: every token's; answer
//                                    int32 rows, then rows*n_vocab float32
//
// The end of stdin ends it. FLASH is llama.cpp's flash_attn_type (-1 auto,
// 0 off, 1 on); TYPE_K and TYPE_V name the KV cache's ggml types (f16,
// f32, q8_0, ...); THREADS 0 keeps llama.cpp's default; GPU 1 puts every
// layer on the first GPU device.
static int cmd_serve(char **a) {
	const char *path = a[0];
	long on_gpu = parse_int(a[1], "gpu"), threads = parse_int(a[2], "threads"), n_ctx = parse_int(a[3], "ctx"),
	     n_batch = parse_int(a[4], "batch"), n_ubatch = parse_int(a[5], "ubatch"), flash = parse_int(a[6], "flash");
	if (n_ctx <= 0 || n_batch <= 0 || n_ubatch <= 0 || n_ubatch > n_batch) die("ctx %ld, batch %ld, ubatch %ld: want positive sizes, ubatch <= batch", n_ctx, n_batch, n_ubatch);
	if (flash < -1 || flash > 1) die("flash %ld: want -1 (auto), 0 or 1", flash);
	enum ggml_type tk = type_named(a[7]), tv = type_named(a[8]);
	init();

	ggml_backend_dev_t dev;
	struct llama_model *model = load_model(path, on_gpu, &dev);
	int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = (uint32_t)n_ctx;
	cp.n_batch = (uint32_t)n_batch;
	cp.n_ubatch = (uint32_t)n_ubatch;
	cp.n_seq_max = 1;
	cp.no_perf = true;
	cp.flash_attn_type = (enum llama_flash_attn_type)flash;
	cp.type_k = tk;
	cp.type_v = tv;
	if (threads > 0) cp.n_threads = cp.n_threads_batch = (int32_t)threads;
	flash_resolved = flash == -1 ? -1 : (int)flash;
	struct llama_context *ctx = llama_init_from_model(model, cp);
	if (!ctx) die("cannot create a context of %ld tokens", n_ctx);

	char info[4096];
	int len = snprintf(info, sizeof info,
	                   "device=%s %s\nflash_attn=%s\ntype_k=%s\ntype_v=%s\nthreads=%d\nthreads_batch=%d\n"
	                   "ctx=%u\nbatch=%u\nubatch=%u\nsystem=%s\n",
	                   ggml_backend_dev_name(dev), ggml_backend_dev_description(dev),
	                   flash_resolved == 1 ? "on" : flash_resolved == 0 ? "off" : "unknown", ggml_type_name(tk), ggml_type_name(tv),
	                   llama_n_threads(ctx), llama_n_threads_batch(ctx), llama_n_ctx(ctx), llama_n_batch(ctx), llama_n_ubatch(ctx),
	                   llama_print_system_info());
	if (len < 0 || len >= (int)sizeof info) die("settings too long");
	int32_t len32 = len;
	write_all(&n_vocab, sizeof n_vocab);
	write_all(&len32, sizeof len32);
	write_all(info, (size_t)len);
	fflush(stdout);

	struct llama_batch batch = llama_batch_init((int32_t)n_batch, 0, 1);
	int32_t *ids = malloc((size_t)n_batch * sizeof *ids);
	if (!ids) die("out of memory");
	long pos = 0;
	for (;;) {
		int32_t op, zero = 0;
		if (!read_exact(&op, sizeof op)) break;
		if (op == 0) {
			llama_memory_clear(llama_get_memory(ctx), true);
			pos = 0;
			write_all(&zero, sizeof zero);
			fflush(stdout);
			continue;
		}
		if (op != 1) die("unknown request %d", op);
		int32_t hdr[2];
		if (!read_exact(hdr, sizeof hdr)) die("a decode request without its header");
		int32_t want = hdr[0], n = hdr[1];
		if (want < 0 || want > 2) die("want %d: 0, 1 or 2", want);
		if (n <= 0 || n > n_batch) die("%d tokens in one request, the batch holds 1 to %ld", n, n_batch);
		if (pos + n > n_ctx) die("positions %ld..%ld past the context of %ld", pos, pos + n - 1, n_ctx);
		if (!read_exact(ids, (size_t)n * sizeof *ids)) die("a decode request without its ids");
		batch.n_tokens = n;
		for (int32_t i = 0; i < n; i++) {
			if (ids[i] < 0 || ids[i] >= n_vocab) die("position %ld: id %d outside the vocabulary of %d", pos + i, ids[i], n_vocab);
			batch.token[i] = ids[i];
			batch.pos[i] = (llama_pos)(pos + i);
			batch.n_seq_id[i] = 1;
			batch.seq_id[i][0] = 0;
			batch.logits[i] = want == 2 || (want == 1 && i == n - 1);
		}
		int rc = llama_decode(ctx, batch);
		if (rc != 0) die("llama_decode at position %ld: %d", pos, rc);
		pos += n;
		int32_t rows = want == 2 ? n : want;
		write_all(&rows, sizeof rows);
		for (int32_t i = n - rows; i < n; i++) {
			const float *row = llama_get_logits_ith(ctx, i);
			if (!row) die("no logits at position %ld", pos - n + i);
			write_all(row, (size_t)n_vocab * sizeof(float));
		}
		fflush(stdout);
	}
	free(ids);
	llama_batch_free(batch);
	llama_free(ctx);
	llama_model_free(model);
	return 0;
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// peak_rss is VmHWM, the process's peak resident set in bytes (0 where
// /proc does not tell). Not getrusage's ru_maxrss: Linux carries that
// across execve, so it would report the Go process that started us.
static long long peak_rss(void) {
	FILE *f = fopen("/proc/self/status", "r");
	if (!f) return 0;
	char line[256];
	long long kb = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmHWM: %lld kB", &kb) == 1) break;
	fclose(f);
	return kb * 1024;
}

// cmd_bench times llama.cpp's CPU backend, or with GPU its first GPU
// device (the Vulkan build's), as llama-bench does, with its default
// context settings (f16 KV cache, flash attention auto): the
// prompt's N tokens decoded as one batch with the last row's logits, then
// GEN single-token steps (token i is prompt[i % N]). A first pass warms up;
// each of REPS passes clears the KV cache, and the fastest prefill and the
// fastest decode are reported, beside the process's peak resident set
// (the mapped model's pages count once touched; on lavapipe the device's
// memory too), how long the warm-up took and the device that ran.
static int cmd_bench(const char *path, const char *count, const char *gen_s, const char *threads_s, const char *reps_s, const char *gpu_s) {
	long n = parse_int(count, "count"), gen = parse_int(gen_s, "gen"), threads = parse_int(threads_s, "threads"),
	     reps = parse_int(reps_s, "reps"), on_gpu = parse_int(gpu_s, "gpu");
	if (n <= 0 || gen <= 0 || reps <= 0) die("bench needs a prompt, steps and repetitions");
	size_t got;
	int32_t *ids = (int32_t *)read_all(&got);
	if (got != (size_t)n * 4) die("%ld token ids are %ld bytes, stdin had %zu", n, n * 4, got);
	init();

	ggml_backend_dev_t dev;
	struct llama_model *model = load_model(path, on_gpu, &dev);
	struct llama_context_params cp = llama_context_default_params();
	cp.n_ctx = (uint32_t)(n + gen);
	cp.n_batch = cp.n_ubatch = (uint32_t)n;
	cp.n_seq_max = 1;
	cp.no_perf = true;
	if (threads > 0) cp.n_threads = cp.n_threads_batch = (int32_t)threads;
	struct llama_context *ctx = llama_init_from_model(model, cp);
	if (!ctx) die("cannot create a context of %ld tokens", n + gen);
	struct llama_batch batch = llama_batch_init((int32_t)n, 0, 1);
	double best_prefill = 0, best_decode = 0, warmup = 0;
	for (long r = 0; r <= reps; r++) {
		llama_memory_clear(llama_get_memory(ctx), true);
		batch.n_tokens = (int32_t)n;
		for (long i = 0; i < n; i++) {
			batch.token[i] = ids[i];
			batch.pos[i] = (llama_pos)i;
			batch.n_seq_id[i] = 1;
			batch.seq_id[i][0] = 0;
			batch.logits[i] = i == n - 1;
		}
		// Each step reads its logits row, as a decode loop does: on a GPU
		// llama_decode returns before the graph has run, and the read
		// waits for it.
		double t0 = now();
		if (llama_decode(ctx, batch) != 0) die("llama_decode of the prompt failed");
		if (!llama_get_logits_ith(ctx, -1)) die("no logits after the prompt");
		double t1 = now();
		for (long i = 0; i < gen; i++) {
			batch.n_tokens = 1;
			batch.token[0] = ids[i % n];
			batch.pos[0] = (llama_pos)(n + i);
			batch.logits[0] = 1;
			if (llama_decode(ctx, batch) != 0) die("llama_decode at position %ld failed", n + i);
			if (!llama_get_logits_ith(ctx, -1)) die("no logits at position %ld", n + i);
		}
		double t2 = now();
		if (r == 0) { // the warm-up: on Vulkan it compiles the shaders it uses
			warmup = t2 - t0;
			continue;
		}
		double prefill = (double)n / (t1 - t0), decode = (double)gen / (t2 - t1);
		if (prefill > best_prefill) best_prefill = prefill;
		if (decode > best_decode) best_decode = decode;
	}
	printf("%.3f %.3f %lld %.3f %s %s\n", best_prefill, best_decode, peak_rss(), warmup, ggml_backend_dev_name(dev),
	       ggml_backend_dev_description(dev));
	llama_batch_free(batch);
	llama_free(ctx);
	llama_model_free(model);
	return 0;
}

// rng is splitmix64: the tiny model is the same for the same seed on every
// machine.
static uint64_t rng_state;
static uint64_t rng_next(void) {
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

// rng_uniform is in [-1, 1).
static float rng_uniform(void) { return (float)((double)(rng_next() >> 11) / 9007199254740992.0 * 2 - 1); }

static struct ggml_tensor *weight(struct ggml_context *ctx, struct gguf_context *g, const char *name, int64_t ne0, int64_t ne1, float scale, float offset) {
	struct ggml_tensor *t = ne1 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1) : ggml_new_tensor_1d(ctx, GGML_TYPE_F32, ne0);
	ggml_set_name(t, name);
	float *d = (float *)t->data;
	for (int64_t i = 0; i < ggml_nelements(t); i++) d[i] = offset + scale * rng_uniform();
	gguf_add_tensor(g, t);
	return t;
}

// cmd_tiny_model writes a two-layer Llama with random f32 weights and
// tokenizer.ggml.model "none" (llama.cpp then makes vocab_size dummy
// tokens): enough for llama.cpp to load, quantize and run, with rows of 256
// so that the K-quants apply.
static int cmd_tiny_model(const char *out, const char *seed) {
	enum { n_vocab = 512, n_embd = 256, n_ff = 512, n_head = 4, n_head_kv = 2, n_layer = 2 };
	const int head_dim = n_embd / n_head;
	char *end;
	errno = 0;
	rng_state = strtoull(seed, &end, 10);
	if (errno || *end || end == seed) die("seed: not an unsigned integer: %s", seed);
	struct ggml_init_params ip = {.mem_size = 64u << 20, .mem_buffer = NULL, .no_alloc = false};
	struct ggml_context *ctx = ggml_init(ip);
	if (!ctx) die("ggml_init failed");
	struct gguf_context *g = gguf_init_empty();
	gguf_set_val_str(g, "general.architecture", "llama");
	gguf_set_val_str(g, "general.name", "logitscope tiny llama");
	gguf_set_val_u32(g, "general.file_type", LLAMA_FTYPE_ALL_F32);
	gguf_set_val_u32(g, "llama.context_length", 2048);
	gguf_set_val_u32(g, "llama.embedding_length", n_embd);
	gguf_set_val_u32(g, "llama.feed_forward_length", n_ff);
	gguf_set_val_u32(g, "llama.block_count", n_layer);
	gguf_set_val_u32(g, "llama.attention.head_count", n_head);
	gguf_set_val_u32(g, "llama.attention.head_count_kv", n_head_kv);
	gguf_set_val_u32(g, "llama.rope.dimension_count", head_dim);
	gguf_set_val_f32(g, "llama.rope.freq_base", 10000.0f);
	gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
	gguf_set_val_u32(g, "llama.vocab_size", n_vocab);
	gguf_set_val_str(g, "tokenizer.ggml.model", "none");

	const float w = 1.0f / sqrtf((float)n_embd), wf = 1.0f / sqrtf((float)n_ff);
	weight(ctx, g, "token_embd.weight", n_embd, n_vocab, 1.0f, 0);
	weight(ctx, g, "output_norm.weight", n_embd, 0, 0.2f, 1.0f);
	weight(ctx, g, "output.weight", n_embd, n_vocab, w * 4, 0);
	char name[64];
	for (int l = 0; l < n_layer; l++) {
#define W(suffix, ne0, ne1, scale, offset)                           \
	snprintf(name, sizeof name, "blk.%d." suffix ".weight", l); \
	weight(ctx, g, name, ne0, ne1, scale, offset)
		W("attn_norm", n_embd, 0, 0.2f, 1.0f);
		W("attn_q", n_embd, n_head * head_dim, w, 0);
		W("attn_k", n_embd, n_head_kv * head_dim, w, 0);
		W("attn_v", n_embd, n_head_kv * head_dim, w, 0);
		W("attn_output", n_head * head_dim, n_embd, w, 0);
		W("ffn_norm", n_embd, 0, 0.2f, 1.0f);
		W("ffn_gate", n_embd, n_ff, w, 0);
		W("ffn_up", n_embd, n_ff, w, 0);
		W("ffn_down", n_ff, n_embd, wf, 0);
#undef W
	}
	if (!gguf_write_to_file(g, out, false)) die("cannot write %s", out);
	gguf_free(g);
	ggml_free(ctx);
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 3) die("usage: harness BINS_DIR COMMAND ARGS...");
	bins_dir = argv[1];
	const char *cmd = argv[2];
	char **a = argv + 3;
	int n = argc - 3;
	if (!strcmp(cmd, "types") && n == 0) return cmd_types();
	if (!strcmp(cmd, "ftypes") && n == 0) return cmd_ftypes();
	if (!strcmp(cmd, "dequantize") && n == 2) return cmd_dequantize(a[0], a[1]);
	if (!strcmp(cmd, "quantize") && n == 3) return cmd_quantize(a[0], a[1], a[2], 0);
	if (!strcmp(cmd, "quantize") && n == 4 && !strcmp(a[3], "imatrix")) return cmd_quantize(a[0], a[1], a[2], 1);
	if (!strcmp(cmd, "quantize-model") && n >= 3) return cmd_quantize_model(a[0], a[1], a[2], a + 3, n - 3);
	if (!strcmp(cmd, "logits") && n == 4) return cmd_logits(a[0], a[1], a[2], a[3]);
	if (!strcmp(cmd, "bench") && n == 6) return cmd_bench(a[0], a[1], a[2], a[3], a[4], a[5]);
	if (!strcmp(cmd, "serve") && n == 9) return cmd_serve(a);
	if (!strcmp(cmd, "tiny-model") && n == 2) return cmd_tiny_model(a[0], a[1]);
	die("unknown command or wrong arguments: %s (%d arguments)", cmd, n);
	return 2;
}
