/*
 * cli.c - helpers shared by the zfolio subcommands (see cli.h).
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

int cli_split_list(char *s, char **items, int max)
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

int cli_parse_units(char *arg, uint64_t *units, int max)
{
	char *names[64];
	const int n = cli_split_list(arg, names, max < 64 ? max : 64);

	if (n < 0)
		cli_die(EXIT_USAGE, "--unit: expected a comma-separated list of at most %d sizes",
			max);
	for (int i = 0; i < n; i++) {
		uint64_t u;

		if (cli_parse_size(names[i], &u) < 0 || u < ZF_PAGE_SIZE || u > ZF_UNIT_MAX ||
		    (u & (u - 1)))
			cli_die(EXIT_USAGE, "--unit %s: expected a power of two from 4k to 2m",
				names[i]);
		units[i] = u;
	}
	return n;
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

void cli_add_image(const char **images, int *n, int max, const char *path)
{
	if (*n == max)
		cli_die(EXIT_USAGE, "at most %d images", max);
	images[(*n)++] = path;
}
