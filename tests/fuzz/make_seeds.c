/*
 * make_seeds.c - writes the seed corpora of the codec fuzz targets.
 *
 *   make_seeds OUTDIR [IMAGE]
 *
 * For each target the build has (lz4 lz4hc zstd deflate isal lzo) it replaces the
 * seed-* files of OUTDIR/<target>/ (other files, such as found-* and crash-*, are kept)
 * with inputs in the format of fuzz_codec.h:
 *
 *  - seed-rt-*: round-trip inputs, one per kind of page: zero, same-filled, text-like,
 *    random, half random/half zero (zswap's test page), pages of a real memory image, a
 *    64 KiB run of it, and the 100- and 1-byte edge cases;
 *  - seed-dec-*: the same pages compressed by the target's codec, so the decoder starts
 *    from valid streams of every block type, plus a 2 MiB zero unit (the largest length);
 *  - seed-dec-real-4k-*: one valid stream made invalid in each way a store could see it:
 *    truncated, a flipped byte, an expected length one off either way, a trailing byte,
 *    no stream at all (and, for zstd, frames of the other kinds libzstd accepts).
 *
 * The level slot cycles through the codec's level table, so the seeds cover the
 * compressor's strategies too. The data comes from a fixed-seed generator, so only a
 * change in a codec library changes the output. IMAGE is a memory image (raw or .zst,
 * read with zf_image_open()), normally /work/shared/corpus/redis.bin.zst; without it the
 * "real" pages are text-like pages instead.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_codec.h"
#include "image.h"

#define PAGE ZF_PAGE_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define FULL_BOUND(n) ((n) + (n) / 8 + 1024)

struct sample {
	const char *name;
	const uint8_t *data;
	size_t len;
};

/* What the current target got, for the summary line. */
static size_t files_written, bytes_written;

static uint64_t rng_state = 0x7a666f6c696f2121ull; /* "zfolio!!" */

/* splitmix64: a fixed sequence for a fixed seed, whatever the platform. */
static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill_random(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rng_next();
}

/* JSON-ish records of words and numbers, like the values of a key-value store. */
static void fill_text(uint8_t *p, size_t len)
{
	static const char *const words[] = { "alpha",  "beta", "gamma", "delta", "page",
					     "folio",  "swap", "cache", "the",	 "of",
					     "memory", "zram", "value", "key",	 "name" };
	size_t off = 0;

	while (off < len) {
		char rec[96];
		const int n = snprintf(rec, sizeof(rec), "{\"id\":%u,\"%s\":\"%s %s\"},\n",
				       (unsigned)(rng_next() % 100000),
				       words[rng_next() % ARRAY_SIZE(words)],
				       words[rng_next() % ARRAY_SIZE(words)],
				       words[rng_next() % ARRAY_SIZE(words)]);
		const size_t take = (size_t)n < len - off ? (size_t)n : len - off;

		memcpy(p + off, rec, take);
		off += take;
	}
}

static void *xmalloc(size_t len)
{
	void *p = calloc(1, len);

	if (!p) {
		fprintf(stderr, "make_seeds: out of memory\n");
		exit(1);
	}
	return p;
}

static void write_file(const char *dir, const char *name, const uint8_t *head, size_t head_len,
		       const uint8_t *body, size_t body_len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(head, 1, head_len, f) != head_len ||
	    (body_len && fwrite(body, 1, body_len, f) != body_len) || fclose(f) != 0) {
		fprintf(stderr, "make_seeds: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	files_written++;
	bytes_written += head_len + body_len;
}

/* A decompress input: header byte, the expected length, then the stream. */
static void write_dec(const char *dir, const char *name, int slot, size_t want,
		      const uint8_t *stream, size_t stream_len)
{
	uint8_t head[FUZZ_DECOMPRESS_HEADER];

	head[0] = fuzz_header_byte(FUZZ_JOB_DECOMPRESS, slot);
	fuzz_put_length(head + 1, want);
	write_file(dir, name, head, sizeof(head), stream, stream_len);
}

static void remove_old_seeds(const char *dir)
{
	struct dirent *d;
	DIR *dp = opendir(dir);

	if (!dp)
		return;
	while ((d = readdir(dp))) {
		if (strncmp(d->d_name, "seed-", 5) != 0)
			continue;
		if (unlinkat(dirfd(dp), d->d_name, 0) != 0)
			fprintf(stderr, "make_seeds: %s/%s: %s\n", dir, d->d_name, strerror(errno));
	}
	closedir(dp);
}

static zf_codec_ctx *open_ctx(const struct fuzz_codec_levels *lv, int slot)
{
	const zf_codec *codec;
	zf_codec_ctx *ctx;
	char name[32];
	int ret;

	if (lv->has_level)
		snprintf(name, sizeof(name), "%s:%d", lv->algorithm, lv->levels[slot]);
	else
		snprintf(name, sizeof(name), "%s", lv->algorithm);
	ret = zf_codec_find(name, &codec);
	if (ret == 0)
		ret = zf_codec_ctx_create(codec, &ctx);
	if (ret != 0) {
		fprintf(stderr, "make_seeds: %s: %s\n", name, zf_strerror(ret));
		exit(1);
	}
	return ctx;
}

/* Compresses s at the level of slot into out (FULL_BOUND(s->len) bytes); returns the size. */
static size_t compress_at(const struct fuzz_codec_levels *lv, int slot, const struct sample *s,
			  uint8_t *out)
{
	zf_codec_ctx *ctx = open_ctx(lv, slot);
	const int n = zf_codec_compress(ctx, s->data, s->len, out, FULL_BOUND(s->len));

	zf_codec_ctx_destroy(ctx);
	if (n <= 0) {
		fprintf(stderr, "make_seeds: %s %s: %s\n", lv->algorithm, s->name, zf_strerror(n));
		exit(1);
	}
	return (size_t)n;
}

/*
 * libzstd decodes more than zfolio writes: skippable frames and, in Debian's build, the
 * legacy formats v0.5 to v0.7, each recognised by its magic number. libFuzzer cannot
 * find a 4-byte magic compared inside an uninstrumented library, so the seeds carry them:
 * the frame behind a skippable frame (a valid input of the same length), and the frame
 * with a legacy magic number, for the legacy decoders to chew on.
 */
static void zstd_variants(const char *dir, int slot, size_t want, const uint8_t *frame, size_t n)
{
	static const uint8_t skippable[] = {
		0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 'z', 'f', 'z', 'f'
	};
	uint8_t *buf = xmalloc(sizeof(skippable) + n);
	char name[64];

	memcpy(buf, skippable, sizeof(skippable));
	memcpy(buf + sizeof(skippable), frame, n);
	write_dec(dir, "seed-dec-real-4k-skippable", slot, want, buf, sizeof(skippable) + n);
	for (uint8_t v = 5; v <= 7; v++) {
		memcpy(buf, frame, n);
		buf[0] = (uint8_t)(0x20 + v); /* 0xFD2FB52v, little-endian */
		snprintf(name, sizeof(name), "seed-dec-real-4k-legacy%u", v);
		write_dec(dir, name, slot, want, buf, n);
	}
	free(buf);
}

static void make_target(const char *outdir, const struct fuzz_codec_levels *lv,
			const struct sample *samples, size_t nsamples, const struct sample *bad)
{
	uint8_t *out = xmalloc(FULL_BOUND(ZF_UNIT_MAX));
	const zf_codec *probe;
	char dir[4096], name[128];
	int slot = 0;
	size_t n;

	if (zf_codec_find(lv->algorithm, &probe) != 0) {
		printf("%-8s not in this build, skipped\n", lv->algorithm);
		free(out);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/%s", outdir, lv->algorithm);
	if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
		fprintf(stderr, "make_seeds: %s: %s\n", dir, strerror(errno));
		exit(1);
	}
	remove_old_seeds(dir);
	files_written = 0;
	bytes_written = 0;

	for (size_t i = 0; i < nsamples; i++) {
		const struct sample *s = &samples[i];
		uint8_t head = fuzz_header_byte(FUZZ_JOB_ROUND_TRIP, slot);

		/* The 2 MiB zero unit is a decompress seed only: 2 MiB of file for one page. */
		if (s->len <= 64 * 1024) {
			snprintf(name, sizeof(name), "seed-rt-%s", s->name);
			write_file(dir, name, &head, 1, s->data, s->len);
		}
		n = compress_at(lv, slot, s, out);
		snprintf(name, sizeof(name), "seed-dec-%s", s->name);
		write_dec(dir, name, slot, s->len, out, n);
		slot = (slot + 1) % lv->nlevels;
	}

	/* One valid stream at the default level, spoiled in each way. */
	slot = lv->default_slot;
	n = compress_at(lv, slot, bad, out);
	write_dec(dir, "seed-dec-real-4k-trunc1", slot, bad->len, out, n - 1);
	write_dec(dir, "seed-dec-real-4k-trunchalf", slot, bad->len, out, n / 2);
	write_dec(dir, "seed-dec-real-4k-short", slot, bad->len - 1, out, n);
	write_dec(dir, "seed-dec-real-4k-long", slot, bad->len + 1, out, n);
	write_dec(dir, "seed-dec-real-4k-empty", slot, bad->len, out, 0);
	out[n] = 0;
	write_dec(dir, "seed-dec-real-4k-trailing", slot, bad->len, out, n + 1);
	out[n / 2] ^= 0x10;
	write_dec(dir, "seed-dec-real-4k-flip", slot, bad->len, out, n);
	out[n / 2] ^= 0x10;
	if (strcmp(lv->algorithm, "zstd") == 0)
		zstd_variants(dir, slot, bad->len, out, n);

	printf("%-8s %2zu seeds, %7zu bytes\n", lv->algorithm, files_written, bytes_written);
	free(out);
}

int main(int argc, char **argv)
{
	uint8_t *zero = xmalloc(ZF_UNIT_MAX), *same = xmalloc(PAGE), *text = xmalloc(PAGE);
	uint8_t *rnd = xmalloc(PAGE), *half = xmalloc(PAGE), *text100 = xmalloc(100);
	uint8_t *real = xmalloc(18 * PAGE);
	const uint8_t one = 'z';
	zf_image *image = NULL;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s OUTDIR [IMAGE]\n", argv[0]);
		return 1;
	}
	for (size_t i = 0; i < PAGE; i += 8)
		memcpy(same + i, "\x5a\xa5\x00\xff\x12\x34\x56\x78", 8);
	fill_text(text, PAGE);
	fill_random(rnd, PAGE);
	fill_random(half, PAGE / 2);
	fill_text(text100, 100);

	/* real: pages 512 and 2048 of the image, then the 16 pages from 1024 (64 KiB). */
	if (argc == 3) {
		const int ret = zf_image_open(argv[2], 0, &image);
		size_t npages;
		const uint8_t *img;

		if (ret != 0) {
			fprintf(stderr, "make_seeds: %s: %s\n", argv[2], zf_strerror(ret));
			return 1;
		}
		img = zf_image_data(image);
		npages = zf_image_size(image) / PAGE;
		if (npages < 2049) {
			fprintf(stderr, "make_seeds: %s: fewer than 2049 pages\n", argv[2]);
			return 1;
		}
		memcpy(real, img + 512 * PAGE, PAGE);
		memcpy(real + PAGE, img + 2048 * PAGE, PAGE);
		memcpy(real + 2 * PAGE, img + 1024 * PAGE, 16 * PAGE);
		zf_image_close(image);
	} else {
		printf("no image: text-like pages stand in for the real ones\n");
		fill_text(real, 18 * PAGE);
	}

	const struct sample samples[] = {
		{ "zero-4k", zero, PAGE },	   { "same-4k", same, PAGE },
		{ "text-4k", text, PAGE },	   { "random-4k", rnd, PAGE },
		{ "half-4k", half, PAGE },	   { "real-4k", real, PAGE },
		{ "real2-4k", real + PAGE, PAGE }, { "real-64k", real + 2 * PAGE, 16 * PAGE },
		{ "text-100", text100, 100 },	   { "byte-1", &one, 1 },
		{ "zero-2m", zero, ZF_UNIT_MAX },
	};
	/* The stream that make_target() spoils: the first real page. */
	const struct sample *const bad = &samples[5];

	for (size_t i = 0; i < ARRAY_SIZE(fuzz_codec_table); i++)
		make_target(argv[1], &fuzz_codec_table[i], samples, ARRAY_SIZE(samples), bad);
	free(zero);
	free(same);
	free(text);
	free(rnd);
	free(half);
	free(text100);
	free(real);
	return 0;
}
