/*
 * cli.c - helpers shared by the zfolio subcommands (see cli.h): the option table and its
 * parser, and the rest.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"

/* -------------------------------------------------------------------------------- */
/* The option table                                                                 */
/* -------------------------------------------------------------------------------- */

enum cli_arg {
	ARG_FLAG, /* no value */
	ARG_TEXT, /* any text; the command checks it (codec names, paths, layouts) */
	ARG_NUMBER, /* a decimal integer in [min, max] */
	ARG_SIZE, /* a byte count with an optional k/m/g suffix, in [min, max] */
	ARG_UNIT, /* a power of two from 4k to 2m: a unit or folio size */
	ARG_CHOICE, /* one of choices ("thread|sigbus") */
};

enum cli_count {
	ONE, /* one value; the last one given counts */
	LIST, /* a comma-separated list, each value run in turn; the last list given counts */
	REPEAT, /* one value per use of the option, as many uses as wanted */
};

struct cli_option {
	const char *name; /* --name */
	char short_name; /* -x, or 0 */
	enum cli_arg arg;
	enum cli_count count;
	const char *metavar; /* one value in --help: N, SIZE, FILE */
	uint64_t min, max; /* ARG_NUMBER, ARG_SIZE */
	const char *choices; /* ARG_CHOICE */
	const char *help;
};

#define UNLIMITED UINT64_MAX

/*
 * Every option of every command. A name means one thing wherever it is taken; ranges and
 * help are the same everywhere (a command may raise a minimum: struct cli_use). The
 * defaults are the commands' own.
 */
static const struct cli_option options[NR_OPTS] = {
	[OPT_IMAGE] = { "image", 0, ARG_TEXT, REPEAT, "FILE", 0, 0, NULL,
			"a memory image: whole 4 KiB pages, raw or zstd-compressed (told by "
			"content); 'sample' is the one built into zfolio" },
	[OPT_SIZE] = { "size", 0, ARG_SIZE, ONE, "SIZE", ZF_PAGE_SIZE, 64ull << 30, NULL,
		       "bytes of memory, filled with the image cut to it, or repeated end to "
		       "end when smaller; rounded up to a whole number of the largest unit" },
	[OPT_CODEC] = { "codec", 0, ARG_TEXT, LIST, "CODEC", 0, 0, NULL,
			"compressors: lz4[:A] lz4hc[:L] zstd[:L] deflate[:L] isal[:L] lzo none "
			"(A: acceleration, L: level)" },
	[OPT_UNIT] = { "unit", 0, ARG_UNIT, LIST, "SIZE", 0, 0, NULL,
		       "unit sizes, powers of two 4k..2m: what is compressed as one object, "
		       "and what a fault brings back in" },
	[OPT_FOLIO] = { "folio", 0, ARG_UNIT, LIST, "SIZE", 0, 0, NULL,
			"folio sizes put into the store, powers of two 4k..2m" },
	[OPT_LAYOUT] = { "layout", 0, ARG_TEXT, LIST, "LAYOUT", 0, 0, NULL,
			 "how a store keeps a folio: split (every 4 KiB page its own entry, as "
			 "Linux zswap stores large folios) or unit:SIZE (each SIZE chunk one "
			 "object, SIZE a power of two 8k..2m)" },
	[OPT_BACKEND] = { "backend", 0, ARG_CHOICE, LIST, "NAME", 0, 0, "zfolio|kernel",
			  "zfolio (a userfaultfd region) or kernel (the running kernel with "
			  "its own zram as swap: needs root, sets zram up with the codec, enables "
			  "only the unit's mTHP size and puts every setting back afterwards, "
			  "also on an error or SIGINT; it never enables zswap)" },
	[OPT_MODE] = { "mode", 0, ARG_CHOICE, LIST, "MODE", 0, 0, "thread|sigbus",
		       "fault service: thread (a service thread reads the userfaultfd and "
		       "serves each fault; transparent, as system calls that touch evicted "
		       "memory work, but every fault pays a cross-thread wakeup) or sigbus "
		       "(UFFD_FEATURE_SIGBUS: the faulting thread serves its own fault in "
		       "zfolio's SIGBUS handler, no wakeup; but a system call that touches "
		       "evicted memory from the kernel - read(2) into it, O_DIRECT, "
		       "/proc/PID/mem - fails with EFAULT instead of faulting it in, and the "
		       "program must not block SIGBUS in threads that touch the region nor "
		       "replace zfolio's handler while a region exists)" },
	[OPT_SWAPIN] = { "swapin", 0, ARG_CHOICE, LIST, "HOW", 0, 0, "whole|per-page",
			 "whole: a fault decompresses its unit once and places all of it with "
			 "one UFFDIO_COPY; per-page: a fault places only its 4 KiB page, "
			 "decompressing the unit for each page, as the kernel does when it "
			 "cannot swap a large folio in (to compare; slow with large units)" },
	[OPT_FRAME] = { "frame", 0, ARG_CHOICE, LIST, "FRAME", 0, 0, "none|2m",
			"placement: none (a fault places its unit as 4 KiB pages) or 2m (the "
			"region places and evicts 2 MiB frames as transparent huge pages, the "
			"store still compressing units: a fault reads the frame's units back "
			"and moves them in as one huge page; falls back to 4 KiB pages where "
			"no huge page can be had)" },
	[OPT_READAHEAD] = { "readahead", 0, ARG_NUMBER, LIST, "N", 0, 4096, NULL,
			    "units read ahead by a readahead thread once two faults hit "
			    "consecutive units (0: none); it decompresses on another core while "
			    "the program works, so that the program finds units resident" },
	[OPT_ENGINES] = { "engines", 0, ARG_NUMBER, LIST, "N", 0, ZF_ENGINES_MAX, NULL,
			  "compression engines (threads) of the store; 0: the thread that "
			  "stores a folio compresses it" },
	[OPT_INFLIGHT] = { "inflight", 0, ARG_NUMBER, ONE, "N", 1, 16, NULL,
			   "puts in flight at once, 1..16: 1 puts with zf_store_put(); more "
			   "with zf_store_put_start(), the oldest finished when N are started, "
			   "so that the engines go on with the next folio while the putting "
			   "thread finishes one" },
	[OPT_GET] = { "get", 0, ARG_CHOICE, ONE, "HOW", 0, 0, "folio|unit",
		      "folio: each folio read back with one zf_store_get_folio(), as the "
		      "kernel loads a large folio; unit: one zf_store_get() per unit" },
	[OPT_GETS] = { "gets", 0, ARG_NUMBER, ONE, "N", 1, 10000000, NULL,
		       "single-unit gets timed for each latency figure, in each of three "
		       "rounds (the median round is reported)" },
	[OPT_REPEAT] = { "repeat", 0, ARG_NUMBER, ONE, "N", 1, 1000, NULL,
			 "timed passes (iterations), after an untimed one; medians over them "
			 "are reported" },
	[OPT_SEED] = { "seed", 0, ARG_NUMBER, ONE, "N", 0, UNLIMITED, NULL,
		       "seed of the random half of the objects that is freed; it is printed, "
		       "and the same seed frees the same objects" },
	[OPT_VERIFY] = { "verify", 0, ARG_FLAG, ONE, NULL, 0, 0, NULL,
			 "compare every byte after every iteration (without it: the byte read "
			 "of every page, and 16 whole pages at random)" },
	[OPT_ALLOW_SWAP] = { "allow-swap", 0, ARG_FLAG, ONE, NULL, 0, 0, NULL,
			     "kernel backend: run although another swap device is active" },
	[OPT_OUTPUT] = { "output", 'o', ARG_TEXT, ONE, "FILE", 0, 0, NULL,
			 "the image to write, zstd-compressed when FILE ends in .zst; written "
			 "under a temporary name and renamed when complete, so that a failed "
			 "capture leaves nothing behind" },
	[OPT_MAX] = { "max", 0, ARG_SIZE, ONE, "SIZE", ZF_PAGE_SIZE, UNLIMITED, NULL,
		      "dump at most SIZE bytes: when more is eligible, evenly spaced runs of "
		      "2 MiB (512 consecutive eligible pages) across the address space" },
	[OPT_STOP] = { "stop", 0, ARG_FLAG, ONE, NULL, 0, 0, NULL,
		       "SIGSTOP the process during the dump, for a consistent image, and "
		       "SIGCONT it afterwards (also on errors and Ctrl-C); it stays stopped "
		       "while the image is compressed" },
	[OPT_ALL] = { "all", 0, ARG_FLAG, ONE, NULL, 0, 0, NULL,
		      "dump every page of the eligible mappings; without it only the pages "
		      "present in RAM or swap (/proc/PID/pagemap), so that address space "
		      "reserved but never touched is left out" },
	[OPT_LEVEL] = { "level", 0, ARG_NUMBER, ONE, "N", 1, 22, NULL,
			"zstd level of a .zst output file, 1..22" },
	[OPT_JSON] = { "json", 0, ARG_FLAG, ONE, NULL, 0, 0, NULL,
		       "print JSON, one object per line, instead of text" },
	[OPT_JSON_FILE] = { "json", 0, ARG_TEXT, ONE, "FILE", 0, 0, NULL,
			    "also write the summary as one JSON object to FILE (the program's "
			    "own output is left alone)" },
	[OPT_LIMIT] = { "limit", 0, ARG_SIZE, ONE, "SIZE", 2 * ZF_PAGE_SIZE, UNLIMITED, NULL,
			"resident bytes of the program's memory in zfolio; past it the coldest "
			"units are compressed away (without it nothing is, unless the program "
			"asks with MADV_PAGEOUT)" },
	[OPT_MIN_SIZE] = { "min-size", 0, ARG_SIZE, ONE, "SIZE", ZF_PAGE_SIZE, UNLIMITED, NULL,
			   "smaller anonymous mappings stay with the kernel (the heap is "
			   "zfolio's whatever its blocks' sizes: it maps large segments)" },
	[OPT_STATS_DIR] = { "stats-dir", 0, ARG_TEXT, ONE, "DIR", 0, 0, NULL,
			    "keep each process's counters there, as PREFIX.PID files of one JSON "
			    "object (default: a temporary directory, removed at the end)" },
	[OPT_FALLBACK] = { "fallback", 0, ARG_FLAG, ONE, NULL, 0, 0, NULL,
			   "when zfolio cannot run here (no userfaultfd), run the program "
			   "without it, and say so, instead of exiting 77" },
	[OPT_WATCH] = { "watch", 0, ARG_NUMBER, ONE, "N", 1, 86400, NULL,
			"print again every N seconds, until the run ends" },
	[OPT_CSV] = { "csv", 0, ARG_FLAG, ONE, NULL, 0, 0, NULL,
		      "comma-separated values with a header line instead of the table" },
	[OPT_HELP] = { "help", 'h', ARG_FLAG, ONE, NULL, 0, 0, NULL, "this text" },
};

static const struct cli_use help_use = { .opt = OPT_HELP };

/* The values: one command is parsed per process, and they live until it ends. */
static struct cli_args args;

static int cli_split_list(char *s, char **items, int max);
static const char *option_head(const struct cli_use *u, int synopsis, char *buf, size_t len);

static int max_values(const struct cli_use *u)
{
	return options[u->opt].count == ONE ? 1 : u->max_values ? u->max_values : CLI_VALUES_MAX;
}

static uint64_t min_of(const struct cli_use *u)
{
	return u->min > options[u->opt].min ? u->min : options[u->opt].min;
}

/* "thread or sigbus", "a, b or c" */
static const char *choices_text(const char *choices, char *buf, size_t len)
{
	size_t n = 0;

	for (const char *p = choices; *p && n + 5 < len; p++) {
		if (*p != '|') {
			buf[n++] = *p;
			continue;
		}
		n += (size_t)snprintf(buf + n, len - n, "%s", strchr(p + 1, '|') ? ", " : " or ");
	}
	buf[n < len ? n : len - 1] = '\0';
	return buf;
}

static int is_choice(const char *choices, const char *s)
{
	const size_t len = strlen(s);

	for (const char *p = choices; p; p = strchr(p, '|'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, s, len) && (p[len] == '|' || p[len] == '\0'))
			return 1;
	}
	return 0;
}

/* Checks and converts value i of option u; exits 2 naming what it expected. */
static void parse_one(const struct cli_use *u, struct cli_value *v, int i)
{
	const struct cli_option *o = &options[u->opt];
	const char *s = v->str[i];
	const uint64_t min = min_of(u);
	char a[16], b[16], c[96];
	uint64_t x;

	switch (o->arg) {
	case ARG_NUMBER:
		if (cli_parse_uint(s, min, o->max, &x) == 0)
			break;
		if (o->max == UNLIMITED)
			cli_die(EXIT_USAGE, "--%s: expected a non-negative integer, got '%s'",
				o->name, s);
		cli_die(EXIT_USAGE, "--%s: expected a number from %llu to %llu, got '%s'", o->name,
			(unsigned long long)min, (unsigned long long)o->max, s);
	case ARG_SIZE:
		if (cli_parse_size(s, &x) == 0 && x >= min && x <= o->max)
			break;
		if (o->max == UNLIMITED)
			cli_die(EXIT_USAGE, "--%s: expected a size of at least %s, got '%s'",
				o->name, cli_format_unit(min, a, sizeof(a)), s);
		cli_die(EXIT_USAGE, "--%s: expected a size from %s to %s, got '%s'", o->name,
			cli_format_unit(min, a, sizeof(a)), cli_format_unit(o->max, b, sizeof(b)),
			s);
	case ARG_UNIT:
		if (cli_parse_size(s, &x) == 0 && x >= ZF_PAGE_SIZE && x <= ZF_UNIT_MAX &&
		    !(x & (x - 1)))
			break;
		cli_die(EXIT_USAGE, "--%s %s: expected a power of two from 4k to 2m", o->name, s);
	case ARG_CHOICE:
		if (!is_choice(o->choices, s))
			cli_die(EXIT_USAGE, "--%s: expected %s, got '%s'", o->name,
				choices_text(o->choices, c, sizeof(c)), s);
		return;
	default:
		return;
	}
	v->num[i] = x;
}

/* Sets option u's values from text: a default (given 0) or the command line's (1). */
static void set_value(const struct cli_use *u, const char *text, int given)
{
	const struct cli_option *o = &options[u->opt];
	struct cli_value *v = &args.v[u->opt];
	const int max = max_values(u);
	char *copy;
	int n;

	if (o->arg == ARG_FLAG) {
		v->n = 1;
		v->given = 1;
		return;
	}
	/* A value given replaces the default; a repeated option's next use adds to it. */
	if (o->count != REPEAT || (given && !v->given)) {
		for (int i = 0; o->count == REPEAT && i < v->n; i++)
			free(v->str[i]);
		free(v->text);
		v->text = NULL;
		v->n = 0;
	}
	v->given |= given;
	copy = strdup(text);
	if (!copy)
		cli_die(1, "out of memory");
	if (o->count == REPEAT) {
		if (v->n == max && max == 1)
			cli_die(EXIT_USAGE, "--%s: one %s at a time", o->name, o->name);
		if (v->n == max)
			cli_die(EXIT_USAGE, "--%s: at most %d of them", o->name, max);
		v->str[v->n] = copy;
		parse_one(u, v, v->n++);
		return;
	}
	v->text = copy;
	if (o->count == ONE) {
		v->str[0] = copy;
		v->n = 1;
	} else {
		n = cli_split_list(copy, v->str, max);
		if (n == -E2BIG && max == 1)
			cli_die(EXIT_USAGE, "--%s %s: one %s at a time", o->name, text, o->name);
		if (n == -E2BIG)
			cli_die(EXIT_USAGE, "--%s: at most %d values, got '%s'", o->name, max,
				text);
		if (n < 0)
			cli_die(EXIT_USAGE, "--%s: expected a comma-separated list, got '%s'",
				o->name, text);
		v->n = n;
	}
	for (int i = 0; i < v->n; i++)
		parse_one(u, v, i);
}

/* The command's use of the option argv names ("--name", "--name=VALUE", "-x"), or NULL. */
static const struct cli_use *find_use(const struct cli_command *cmd, const char *arg,
				      const char **value)
{
	const char *name = arg + 2, *eq = strchr(arg, '=');
	const size_t len = eq ? (size_t)(eq - name) : strlen(name);

	*value = NULL;
	for (const struct cli_use *u = cmd->uses;; u++) {
		const struct cli_option *o;

		if (u->opt == OPT_NONE)
			u = &help_use;
		o = &options[u->opt];
		if (arg[1] != '-' ? o->short_name && arg[1] == o->short_name && !arg[2]
				  : strlen(o->name) == len && !strncmp(o->name, name, len)) {
			if (arg[1] == '-' && eq)
				*value = eq + 1;
			return u;
		}
		if (u == &help_use)
			return NULL;
	}
}

static int takes(const struct cli_command *cmd, enum cli_opt opt)
{
	for (const struct cli_use *u = cmd->uses; u->opt != OPT_NONE; u++) {
		if (u->opt == opt)
			return 1;
	}
	return 0;
}

const struct cli_args *cli_parse(const struct cli_command *cmd, int argc, char **argv)
{
	int operands_only = 0, n_operands = 0;

	for (const struct cli_use *u = cmd->uses; u->opt != OPT_NONE; u++) {
		if (u->def)
			set_value(u, u->def, 0);
	}
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *value;
		const struct cli_use *u;

		if (operands_only || arg[0] != '-' || !arg[1]) {
			if (cmd->command_line) {
				args.operand = arg;
				args.rest = &argv[i];
				n_operands = 1;
				break;
			}
			if (!cmd->operand)
				cli_die(EXIT_USAGE, "unexpected argument '%s'%s", arg,
					takes(cmd, OPT_IMAGE) ? " (images are given with --image)"
							      : "");
			if (n_operands++)
				cli_die(EXIT_USAGE, "one %s only ('%s' and '%s')", cmd->operand,
					args.operand, arg);
			args.operand = arg;
			continue;
		}
		if (!strcmp(arg, "--")) {
			operands_only = 1;
			continue;
		}
		u = find_use(cmd, arg, &value);
		if (!u)
			cli_die(EXIT_USAGE, "unknown option '%s' (see 'zfolio %s --help')", arg,
				cmd->name);
		if (u->opt == OPT_HELP) {
			cli_usage(cmd, stdout);
			exit(0);
		}
		if (options[u->opt].arg == ARG_FLAG && value)
			cli_die(EXIT_USAGE, "--%s takes no value", options[u->opt].name);
		if (options[u->opt].arg != ARG_FLAG && !value) {
			if (i + 1 == argc)
				cli_die(EXIT_USAGE, "%s needs a value (see 'zfolio %s --help')",
					arg, cmd->name);
			value = argv[++i];
		}
		set_value(u, value, 1);
	}
	if (cmd->operand && cmd->operand[0] != '[' && !n_operands)
		cli_die(EXIT_USAGE, "missing %s (see 'zfolio %s --help')", cmd->operand, cmd->name);
	for (const struct cli_use *u = cmd->uses; u->opt != OPT_NONE; u++) {
		char head[64];

		if (u->required && !args.v[u->opt].n)
			cli_die(EXIT_USAGE, "missing %s (see 'zfolio %s --help')",
				option_head(u, 1, head, sizeof(head)), cmd->name);
	}
	return &args;
}

/* -------------------------------------------------------------------------------- */
/* --help                                                                           */
/* -------------------------------------------------------------------------------- */

#define HELP_WIDTH 88
#define HELP_INDENT 22

/* A space that print_wrapped() prints but never breaks a line at. */
#define NBSP '\x01'

/*
 * Prints text word by word from column col, breaking lines before HELP_WIDTH and
 * starting each new line at column indent; a line's first word is never moved.
 */
static void print_wrapped(FILE *f, const char *text, int col, int indent)
{
	while (*text) {
		const size_t len = strcspn(text, " ");

		if (col > indent && col + 1 + (int)len > HELP_WIDTH) {
			fprintf(f, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', f);
			col++;
		}
		for (size_t i = 0; i < len; i++)
			fputc(text[i] == NBSP ? ' ' : text[i], f);
		col += (int)len;
		text += len;
		while (*text == ' ')
			text++;
	}
	fputc('\n', f);
}

/* "--name LIST", "-o, --output FILE": the option's head in --help, or its synopsis word. */
static const char *option_head(const struct cli_use *u, int synopsis, char *buf, size_t len)
{
	const struct cli_option *o = &options[u->opt];
	const char *meta = o->count == LIST && max_values(u) > 1 ? "LIST" : o->metavar;
	int n;

	if (synopsis && o->short_name)
		n = snprintf(buf, len, "-%c", o->short_name);
	else if (o->short_name)
		n = snprintf(buf, len, "-%c, --%s", o->short_name, o->name);
	else
		n = snprintf(buf, len, "--%s", o->name);
	if (o->arg == ARG_CHOICE && o->count == ONE)
		meta = o->choices;
	if (o->arg != ARG_FLAG)
		n += snprintf(buf + n, len - (size_t)n, " %s", meta);
	if (synopsis && o->count == REPEAT && max_values(u) > 1)
		snprintf(buf + n, len - (size_t)n, " ...");
	return buf;
}

void cli_usage(const struct cli_command *cmd, FILE *f)
{
	char head[64], synopsis[1024], line[1200];
	size_t n = 0;
	int lists = 0, indent;

	/*
	 * The synopsis: the operand, the required options, then the others in brackets; a
	 * command line to run goes last, after "--".
	 */
	if (cmd->operand && !cmd->command_line)
		n += (size_t)snprintf(synopsis + n, sizeof(synopsis) - n, "%s ", cmd->operand);
	for (int pass = 0; pass < 2; pass++) {
		for (const struct cli_use *u = cmd->uses; u->opt != OPT_NONE; u++) {
			if ((pass == 0) != (u->required != 0))
				continue;
			option_head(u, 1, head, sizeof(head));
			n += (size_t)snprintf(synopsis + n, sizeof(synopsis) - n,
					      pass ? "[%s] " : "%s ", head);
			lists |= options[u->opt].count == LIST && max_values(u) > 1;
		}
	}
	if (cmd->operand && cmd->command_line)
		n += (size_t)snprintf(synopsis + n, sizeof(synopsis) - n, "[--] %s ", cmd->operand);
	/* What a pair of brackets holds stays on one line. */
	for (int depth = 0, i = 0; synopsis[i]; i++) {
		depth += (synopsis[i] == '[') - (synopsis[i] == ']');
		if (depth && synopsis[i] == ' ')
			synopsis[i] = NBSP;
	}
	indent = fprintf(f, "usage: zfolio %s ", cmd->name);
	if (n)
		synopsis[n - 1] = '\0';
	print_wrapped(f, synopsis, indent, indent);

	fprintf(f, "\n%s", cmd->about);
	fprintf(f, "\noptions%s:\n",
		lists ? " (LIST: comma-separated values, each run in turn)" : "");
	for (const struct cli_use *u = cmd->uses;; u++) {
		const struct cli_option *o;
		int col;

		if (u->opt == OPT_NONE)
			u = &help_use;
		o = &options[u->opt];
		col = fprintf(f, "  %s", option_head(u, 0, head, sizeof(head)));
		if (col + 2 > HELP_INDENT) {
			fprintf(f, "\n%*s", HELP_INDENT, "");
		} else {
			fprintf(f, "%*s", HELP_INDENT - col, "");
		}
		n = (size_t)snprintf(line, sizeof(line), "%s", o->help);
		if (o->count == REPEAT && max_values(u) > 1)
			n += (size_t)snprintf(line + n, sizeof(line) - n, "; repeatable");
		if (u->def_help || (u->def && o->arg != ARG_FLAG))
			snprintf(line + n, sizeof(line) - n, " (default:%c%s)", NBSP,
				 u->def_help ? u->def_help : u->def);
		print_wrapped(f, line, HELP_INDENT, HELP_INDENT);
		if (u == &help_use)
			break;
	}
	if (cmd->notes)
		fprintf(f, "\n%s", cmd->notes);
}

/* -------------------------------------------------------------------------------- */
/* The rest                                                                         */
/* -------------------------------------------------------------------------------- */

void cli_die(int code, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	cli_progress_done();
	fputs("zfolio: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

int cli_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int cli_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (tolower((unsigned char)*end)) {
	case 'k':
		shift = 10;
		end++;
		break;
	case 'm':
		shift = 20;
		end++;
		break;
	case 'g':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (shift && tolower((unsigned char)*end) == 'i')
		end++;
	if (tolower((unsigned char)*end) == 'b')
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *cli_format_unit(uint64_t bytes, char *buf, size_t len)
{
	if (bytes && bytes % (1u << 30) == 0)
		snprintf(buf, len, "%llug", (unsigned long long)(bytes >> 30));
	else if (bytes && bytes % (1u << 20) == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(bytes >> 20));
	else if (bytes && bytes % 1024 == 0)
		snprintf(buf, len, "%lluk", (unsigned long long)(bytes >> 10));
	else
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	return buf;
}

/*
 * Splits a comma-separated list in place (s is modified) into at most max items.
 * Returns the count, or -E2BIG when there are more, or -EINVAL for an empty item.
 */
static int cli_split_list(char *s, char **items, int max)
{
	int n = 0;

	for (char *tok = s;; n++) {
		char *comma = strchr(tok, ',');

		if (comma)
			*comma = '\0';
		if (!*tok)
			return -EINVAL;
		if (n == max)
			return -E2BIG;
		items[n] = tok;
		if (!comma)
			return n + 1;
		tok = comma + 1;
	}
}

void *cli_map_buffer(size_t len)
{
	uint8_t *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);

	if (p == MAP_FAILED)
		cli_die(1, "cannot allocate %zu MiB of buffers", len >> 20);
	for (size_t off = 0; off < len; off += ZF_PAGE_SIZE)
		p[off] = 0;
	return p;
}

const zf_codec *cli_find_codec(const char *name)
{
	const zf_codec *codec = NULL;
	const int ret = zf_codec_find(name, &codec);

	if (ret < 0)
		cli_die(EXIT_USAGE, "--codec %s: %s (this build has: %s)", name,
			ret == -ENOENT	  ? "unknown codec"
			: ret == -ENOTSUP ? "not built in"
					  : "bad level",
			zf_codec_algorithms());
	return codec;
}

void cli_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static int progress_shown;

void cli_json_num(const char *name, double v, int decimals)
{
	if (isfinite(v))
		printf(",\"%s\":%.*f", name, decimals, v);
	else
		printf(",\"%s\":null", name);
}

void cli_json_u64(const char *name, uint64_t v)
{
	printf(",\"%s\":%llu", name, (unsigned long long)v);
}

void cli_json_counters(const char *text)
{
	const char *sep = "";

	printf(",\"counters\":{");
	while (text && *text) {
		const char *end = strchr(text, '\n'), *space = strchr(text, ' ');
		const size_t len = end ? (size_t)(end - text) : strlen(text);

		if (space && space < text + len) {
			printf("%s\"%.*s\":%.*s", sep, (int)(space - text), text,
			       (int)(text + len - space - 1), space + 1);
			sep = ",";
		}
		text += len + (end != NULL);
	}
	printf("}");
}

zf_region *cli_region_create(const zf_region_options *o, size_t size)
{
	zf_region *r = NULL;
	char ub[16];
	const int ret = zf_region_create(NULL, size, o, &r);

	if (ret == -EPERM || ret == -ENOSYS || ret == -ENOTSUP)
		cli_die(EXIT_SKIP,
			"userfaultfd is unavailable for mode %s (%s): run as root, or give access "
			"to /dev/userfaultfd, or set vm.unprivileged_userfaultfd=1",
			o->fault_mode == ZF_FAULT_SIGBUS ? "sigbus" : "thread", zf_strerror(ret));
	if (ret == -EINVAL)
		cli_die(EXIT_USAGE,
			"the region refuses unit %s, codec %s, mode %s, readahead %u, swapin %s: "
			"%s",
			cli_format_unit(o->unit, ub, sizeof(ub)), o->codec ? o->codec : "default",
			o->fault_mode == ZF_FAULT_SIGBUS ? "sigbus" : "thread", o->readahead,
			o->swapin == ZF_SWAPIN_PER_PAGE ? "per-page" : "whole", zf_strerror(ret));
	if (ret)
		cli_die(1, "zf_region_create: %s", zf_strerror(ret));
	return r;
}

void cli_progress(const char *fmt, ...)
{
	static int tty = -1;
	va_list ap;

	if (tty < 0)
		tty = isatty(STDERR_FILENO);
	if (!tty)
		return;
	fputs("\r\033[K", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
	progress_shown = 1;
}

void cli_progress_done(void)
{
	if (progress_shown)
		fputs("\r\033[K", stderr);
	progress_shown = 0;
}

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t cli_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double cli_mbps(uint64_t bytes, double seconds)
{
	return seconds > 0 ? (double)bytes / 1e6 / seconds : 0;
}

/* The bytes of data/sample.bin.zst, placed by sample.S. */
extern const unsigned char zfolio_sample_start[], zfolio_sample_end[];

zf_image *cli_open_image(const char *path)
{
	zf_image *img = NULL;
	int ret;

	if (!path || !strcmp(path, "sample")) {
		ret = zf_image_from_memory(zfolio_sample_start,
					   (size_t)(zfolio_sample_end - zfolio_sample_start), 1,
					   "sample", &img);
		if (ret < 0)
			cli_die(1, "the embedded sample image: %s", zf_strerror(ret));
		return img;
	}
	ret = zf_image_open(path, 0, &img);
	if (ret == -EINVAL)
		cli_die(EXIT_USAGE,
			"%s: not a memory image (empty, or not a whole number of %u-byte pages)",
			path, ZF_PAGE_SIZE);
	if (ret < 0)
		cli_die(ret == -ENOENT ? EXIT_USAGE : 1, "%s: %s", path, zf_strerror(ret));
	/* The loader moves its buffer as it grows (mremap): touched again where it is now. */
	for (size_t off = 0; off < zf_image_size(img); off += ZF_PAGE_SIZE)
		(void)((const volatile uint8_t *)zf_image_data(img))[off];
	return img;
}

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double cli_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double cli_percentile(double *v, int n, double p)
{
	int rank;

	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	rank = (int)ceil(p / 100 * n);
	return v[rank < 1 ? 0 : rank > n ? n - 1 : rank - 1];
}

void cli_tile(uint8_t *dst, uint64_t size, const zf_image *img)
{
	const uint8_t *src = zf_image_data(img);
	const uint64_t n = zf_image_size(img);

	for (uint64_t off = 0; off < size; off += n)
		memcpy(dst + off, src, size - off < n ? size - off : n);
}

char *cli_region_stats_text(zf_region *r)
{
	char probe[1];
	const size_t len = zf_region_stats_text(r, probe, sizeof(probe)) + 1;
	char *text = malloc(len);

	if (!text)
		cli_die(1, "out of memory");
	zf_region_stats_text(r, text, len);
	return text;
}

void cli_check_images(const struct cli_value *images)
{
	for (int i = 0; i < images->n; i++) {
		if (strcmp(images->str[i], "sample") && access(images->str[i], R_OK))
			cli_die(EXIT_USAGE, "%s: %s", images->str[i], strerror(errno));
	}
}
