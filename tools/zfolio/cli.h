/*
 * cli.h - what the zfolio subcommands share: the option table and its parser, error
 * exits, progress on a terminal, JSON output. The CLI uses only the public header (and
 * its own image.h).
 *
 * Options: one table (cli.c) names every option of every command, with what its argument
 * is, whether it takes a comma-separated list (each value run in turn) and its help line;
 * a flag means the same thing in every command that takes it. A command lists the options
 * it takes, with its defaults (struct cli_command), and cli_parse() parses its argv and
 * prints its --help from that, so the help cannot drift from what is parsed.
 *
 * Exit codes: 0 success, 1 the job failed (I/O error, round-trip mismatch), 2 bad usage
 * or bad input named on the command line (one line on stderr), 77 a required system
 * feature is missing.
 */
#ifndef ZF_CLI_H
#define ZF_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "image.h"
#include "zfolio.h"

#define EXIT_USAGE 2
#define EXIT_SKIP 77

/* Every option of every command (cli.c has the table: name, argument, help). */
enum cli_opt {
	OPT_NONE, /* ends a command's list of options */
	OPT_IMAGE,
	OPT_SIZE,
	OPT_CODEC,
	OPT_UNIT,
	OPT_FOLIO,
	OPT_LAYOUT,
	OPT_BACKEND,
	OPT_MODE,
	OPT_SWAPIN,
	OPT_FRAME,
	OPT_READAHEAD,
	OPT_ENGINES,
	OPT_INFLIGHT,
	OPT_GET,
	OPT_GETS,
	OPT_REPEAT,
	OPT_SEED,
	OPT_VERIFY,
	OPT_ALLOW_SWAP,
	OPT_OUTPUT,
	OPT_MAX,
	OPT_STOP,
	OPT_ALL,
	OPT_LEVEL,
	OPT_JSON,
	OPT_JSON_FILE,
	OPT_CSV,
	OPT_LIMIT,
	OPT_MIN_SIZE,
	OPT_STATS_DIR,
	OPT_FALLBACK,
	OPT_WATCH,
	OPT_HELP,
	NR_OPTS
};

/* The most values one list (or repeated option) holds. */
#define CLI_VALUES_MAX 32

/* An option as one command takes it. */
struct cli_use {
	enum cli_opt opt;
	const char *def; /* default, parsed as a command line's value would be; NULL: none */
	const char *def_help; /* the default in --help when def cannot say it (computed) */
	int max_values; /* of a list or repeated option; 0: CLI_VALUES_MAX */
	uint64_t min; /* a number's or size's least value, when above the table's; 0: the table's */
	int required;
};

/* A command: its name, what --help says around the options, the options it takes. */
struct cli_command {
	const char *name; /* "bench codec" */
	/* "PID": the one operand it needs; "[PID]" in brackets: one it may take; NULL: none */
	const char *operand;
	/*
	 * The operand and every argument after it are a command line to run (zfolio run):
	 * options end at the first argument that is not one, or at "--".
	 */
	int command_line;
	const char *about; /* between the usage line and the options */
	const char *notes; /* after the options; may be NULL */
	struct cli_use uses[24]; /* ended by OPT_NONE; -h/--help is implied */
};

/* An option's values after parsing: the command's default unless given. */
struct cli_value {
	int given; /* on the command line */
	int n; /* values: list items or repetitions; 1 for a flag that is set; 0: none */
	char *str[CLI_VALUES_MAX];
	uint64_t num[CLI_VALUES_MAX]; /* numbers, sizes and units: each value parsed */
	char *text; /* the list as given (str[] points into it) */
};

struct cli_args {
	struct cli_value v[NR_OPTS];
	const char *operand; /* the command's operand, when it takes one */
	char **rest; /* with command_line: the command line, NULL-terminated (argv's) */
};

/*
 * Parses a command's argv (argv[0] is its name) against the option table: "--name VALUE",
 * "--name=VALUE", "-o VALUE", flags, "--" ending the options. Prints the help and exits 0
 * on -h/--help; exits 2 with one line on stderr on anything it refuses (an unknown
 * option, a value out of range or not among the choices, a missing operand). Returns the
 * values, which live until the process ends.
 */
const struct cli_args *cli_parse(const struct cli_command *cmd, int argc, char **argv);
/* Prints the command's --help, generated from the table and its uses, to f. */
void cli_usage(const struct cli_command *cmd, FILE *f);

/* Prints "zfolio: <message>" to stderr and exits with code. */
void cli_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/*
 * Parses a size: a number with an optional k/m/g suffix (powers of 1024, case
 * insensitive, optional trailing "b"/"ib"). Returns 0 or -EINVAL.
 */
int cli_parse_size(const char *s, uint64_t *out);
/* Parses a non-negative decimal integer in [min, max]. Returns 0 or -EINVAL. */
int cli_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Formats bytes as "4k", "64k", "2m" when exact, else a byte count. */
const char *cli_format_unit(uint64_t bytes, char *buf, size_t len);

/*
 * An anonymous mapping of len bytes (at least one page), every page written once; exits
 * with a message on failure. Timed loops must not pay for the first touch of their
 * memory: a fault per page, where MAP_POPULATE does not take the cost away (the
 * program's own first touch pays it), and a median of a few passes leans on the slow
 * first one.
 */
void *cli_map_buffer(size_t len);

/* The codec named name; exits with a message (exit code 2) naming the choices if none. */
const zf_codec *cli_find_codec(const char *name);

/* Writes s as a JSON string literal (with quotes) to f. */
void cli_json_string(FILE *f, const char *s);
/* To stdout, for the fields after an object's first: ,"name":v (null when v is not finite). */
void cli_json_num(const char *name, double v, int decimals);
void cli_json_u64(const char *name, uint64_t v);
/* To stdout: ,"counters":{...} from "name value" lines (zf_*_stats_text() output). */
void cli_json_counters(const char *text);

/*
 * zf_region_create() with a store of its own, or an exit: 77 when userfaultfd is
 * unavailable (with what to do), 2 when the region refuses the options, 1 otherwise.
 */
zf_region *cli_region_create(const zf_region_options *o, size_t size);

/* Progress on stderr when it is a terminal; no output otherwise. */
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Clears the progress line, if any. */
void cli_progress_done(void);

/* Seconds on the monotonic clock. */
double cli_now(void);
/* Nanoseconds on the monotonic clock. */
uint64_t cli_now_ns(void);
/* Throughput in MB/s (10^6 bytes) of bytes in seconds; 0 when seconds is not > 0. */
double cli_mbps(uint64_t bytes, double seconds);

/* The median of v[0..n) (n >= 1); sorts v in place, so v[0] is then the least. */
double cli_median(double *v, int n);
/* The p-th percentile (0..100, nearest rank) of v[0..n) (n >= 1); sorts v in place. */
double cli_percentile(double *v, int n, double p);

/*
 * The default memory image, compiled into the zfolio binary (data/sample.bin.zst).
 * Opens the image named by path, or the embedded sample when path is NULL or "sample",
 * with every page touched once (see cli_map_buffer). Exits with a message on error.
 */
zf_image *cli_open_image(const char *path);
/* Exits with code 2 naming the first of --image's files that cannot be read. */
void cli_check_images(const struct cli_value *images);
/* Fills dst[0..size) with the image's pages, repeated end to end when it is smaller. */
void cli_tile(uint8_t *dst, uint64_t size, const zf_image *img);

/* xorshift64: the next of a small, fast, repeatable sequence (*x must not be 0). */
static inline uint64_t cli_xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * The byte of page i that a swap-in pass reads, for a pass numbered salt: a different
 * place in each page and pass. Inline: the timed loops call it for every page.
 */
static inline size_t cli_touch_offset(uint64_t i, uint32_t salt)
{
	return (size_t)(((uint32_t)i * 2654435761u + salt * 40503u) >> 20);
}

/* zf_region_stats_text() in a buffer of its own (malloc()ed); exits when out of memory. */
char *cli_region_stats_text(zf_region *r);

/* The subcommands. Each takes its own argv (argv[0] is the subcommand name). */
int cmd_bench(int argc, char **argv);
int cmd_capture(int argc, char **argv);
int cmd_pageout(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_stat(int argc, char **argv);
/* The benchmarks under "zfolio bench" (cmd_bench dispatches to them). */
int bench_zpool(int argc, char **argv);
int bench_store(int argc, char **argv);
int bench_region(int argc, char **argv);
int bench_fresh(int argc, char **argv);

#endif /* ZF_CLI_H */
