/*
 * cli.h - what the zfolio subcommands share: argument parsing helpers, error exits,
 * progress on a terminal, JSON string output. The CLI uses only the public header.
 *
 * Exit codes: 0 success, 1 the job failed (I/O error, round-trip mismatch), 2 bad usage
 * or bad input named on the command line, 77 a required system feature is missing.
 */
#ifndef ZF_CLI_H
#define ZF_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "image.h"
#include "zfolio.h"

#define EXIT_USAGE 2
#define EXIT_SKIP 77

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
 * Splits a comma-separated list in place (s is modified) into at most max items.
 * Returns the count, or -E2BIG when there are more, or -EINVAL for an empty item.
 */
int cli_split_list(char *s, char **items, int max);

/*
 * An anonymous mapping of len bytes (at least one page), every page written once; exits
 * with a message on failure. Timed loops must not pay for the first touch of their
 * memory: a fault per page, ~5 us on this VM, where MAP_POPULATE does not take the cost
 * away (the program's own first touch pays it), and a median of a few passes leans on
 * the slow first one.
 */
void *cli_map_buffer(size_t len);

/* The codec named name; exits with a message (exit code 2) naming the choices if none. */
const zf_codec *cli_find_codec(const char *name);

/*
 * Parses a comma-separated list of unit sizes (arg is modified), each a power of two
 * from 4k to 2m, into units (at most max). Returns the count; exits with code 2 on bad
 * input.
 */
int cli_parse_units(char *arg, uint64_t *units, int max);

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
/* Appends path to images[] (--image, repeatable); exits with code 2 past max of them. */
void cli_add_image(const char **images, int *n, int max, const char *path);

/* The subcommands. Each takes its own argv (argv[0] is the subcommand name). */
int cmd_bench(int argc, char **argv);
int cmd_capture(int argc, char **argv);
int cmd_pageout(int argc, char **argv);
/* The benchmarks under "zfolio bench" (cmd_bench dispatches to them). */
int bench_zpool(int argc, char **argv);
int bench_store(int argc, char **argv);
int bench_region(int argc, char **argv);

#endif /* ZF_CLI_H */
