/* Description: the store's writeback to a backing file on a really full filesystem. A
 * 64 KiB tmpfs is mounted on a fresh directory and stores are made with their backing
 * file there (an unnamed file, with a size limit twice what the filesystem holds).
 *
 *  1. Split mode, 48 incompressible and 16 compressible pages: zf_store_writeback(all)
 *     writes what fits and stops early; the writes that failed are counted in
 *     bd_write_errors, the pages written back in written_back_pages/total and bd_writes,
 *     and every page still reads back exactly, from the file or from the pool. A second
 *     writeback fails again and changes nothing. Invalidating written-back pages frees
 *     their slots (and so the blocks behind them): the next writeback reuses them.
 *  2. Unit mode 64k, a 256 KiB pool limit and the writeback policy: 40 incompressible
 *     64 KiB folios are put. Each put either goes in (writeback made room) or is refused
 *     with -ENOSPC (it could not: the filesystem is full) and counted in
 *     reject_pool_full; nothing else. Every folio that went in reads back exactly, every
 *     refused one is absent, and the counters agree with the puts.
 *
 * After each store is destroyed, the filesystem's space is all back. The tmpfs is mounted
 * in a private mount namespace when the kernel lets us make one, so that even a killed
 * test leaves no mount behind; the directory is removed on every exit path, including
 * fatal signals. Uses the public header only. Returns 0 pass, 1 fail, 77 skip (not root,
 * or no tmpfs mount allowed here).
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "zfolio.h"
#include "tinyfs.h"
#include "../unit/codec_pick.h"

enum { PASS = 0, FAIL = 1, SKIP = 77 };

#define FS_BYTES (64u << 10)
#define PAGE ZF_PAGE_SIZE
#define K64 (64u << 10)
#define OWNER 3u
#define U(x) ((unsigned long long)(x))

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			ret = FAIL;                                                                \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

/* Incompressible bytes from a seed (xorshift64*). */
static void fill_random(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull | 1;

	for (size_t i = 0; i < len; i += 8) {
		uint64_t w;

		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		w = s * 0x2545F4914F6CDD1DULL;
		memcpy(buf + i, &w, 8);
	}
}

/* Compressible: a few distinct words, varied by the seed. */
static void fill_text(uint8_t *buf, size_t len, uint64_t seed)
{
	static const char *const words[] = { "page ", "folio ", "zswap ", "store ", "unit " };

	for (size_t i = 0; i < len; i++) {
		const char *w = words[(i / 7 + seed) % 5];

		buf[i] = (uint8_t)w[i % 5];
	}
	memcpy(buf, &seed, sizeof(seed));
}

static zf_store_stats stats_of(zf_store *s)
{
	zf_store_stats st;

	zf_store_get_stats(s, &st, sizeof(st));
	return st;
}

/* Destroys *s: the store must give the filesystem back every byte it took. */
static int destroy_gives_back(zf_store **s, uint64_t free_before)
{
	int ret = PASS;

	zf_store_destroy(*s);
	*s = NULL;
	CHECK(tinyfs_free_bytes() == free_before, "destroy gave back %llu of %llu bytes",
	      U(tinyfs_free_bytes()), U(free_before));
out:
	return ret;
}

/* Test 1: explicit writeback until the filesystem is full. */
static int run_writeback(void)
{
	enum { NPAGES = 64 };
	static uint8_t data[NPAGES][PAGE], back[PAGE];
	int gone[NPAGES] = { 0 };
	const uint64_t free_before = tinyfs_free_bytes();
	zf_store_options o;
	zf_store_stats st, st2;
	zf_store *s = NULL;
	long wrote, again;
	int ret;

	zf_store_options_init(&o);
	o.codec = test_codec_name();
	o.backing_path = tinyfs_dir;
	/*
	 * Twice what the filesystem holds: the file has slots the filesystem cannot back,
	 * and few enough that the backing's next-fit search comes back to the freed ones.
	 */
	o.backing_bytes = 2 * FS_BYTES;
	ret = zf_store_create(&o, &s);
	CHECK(ret == 0, "store_create: %s", zf_strerror(ret));
	for (unsigned i = 0; i < NPAGES; i++) {
		if (i % 4 == 3)
			fill_text(data[i], PAGE, i);
		else
			fill_random(data[i], PAGE, i + 1);
		ret = zf_store_put(s, OWNER, i, data[i], PAGE);
		CHECK(ret == 0, "put %u: %s", i, zf_strerror(ret));
	}
	st = stats_of(s);
	CHECK(st.stored_pages == NPAGES && st.stored_incompressible_pages == 48,
	      "stored %llu, incompressible %llu", U(st.stored_pages),
	      U(st.stored_incompressible_pages));

	wrote = zf_store_writeback(s, UINT64_MAX);
	st = stats_of(s);
	printf("writeback: %ld of %d pages written back before the filesystem filled up, "
	       "%llu write errors\n",
	       wrote, NPAGES, U(st.bd_write_errors));
	CHECK(wrote > 0 && wrote < NPAGES, "writeback returned %ld", wrote);
	CHECK((uint64_t)wrote * PAGE / 2 <= FS_BYTES, "%ld pages in a %u-byte filesystem", wrote,
	      FS_BYTES);
	CHECK(st.bd_write_errors > 0, "no write error counted");
	CHECK(st.written_back_pages == (uint64_t)wrote && st.written_back_total == (uint64_t)wrote,
	      "written_back_pages %llu, total %llu, writeback said %ld", U(st.written_back_pages),
	      U(st.written_back_total), wrote);
	CHECK(st.bd_writes == (uint64_t)wrote, "bd_writes %llu", U(st.bd_writes));
	CHECK(st.stored_pages == NPAGES && st.orig_data_size == NPAGES * PAGE, "stored_pages %llu",
	      U(st.stored_pages));
	CHECK(st.bd_reads == 0 && st.bd_read_errors == 0 && st.decompress_fail == 0,
	      "reads %llu, read errors %llu, decompress_fail %llu", U(st.bd_reads),
	      U(st.bd_read_errors), U(st.decompress_fail));

	/* Again: nothing more fits, nothing moves. */
	again = zf_store_writeback(s, UINT64_MAX);
	st2 = stats_of(s);
	CHECK(again == 0 || again == -ENOSPC, "second writeback returned %ld", again);
	CHECK(st2.written_back_pages == st.written_back_pages && st2.bd_writes == st.bd_writes &&
		      st2.bd_write_errors > st.bd_write_errors,
	      "second writeback: written back %llu, writes %llu, errors %llu -> %llu",
	      U(st2.written_back_pages), U(st2.bd_writes), U(st.bd_write_errors),
	      U(st2.bd_write_errors));

	/* Every page reads back, from the file or from the pool. */
	for (unsigned i = 0; i < NPAGES; i++) {
		memset(back, 0xa5, PAGE);
		ret = zf_store_get(s, OWNER, i, back, PAGE);
		CHECK(ret == 0, "get %u: %s", i, zf_strerror(ret));
		CHECK(memcmp(back, data[i], PAGE) == 0, "page %u differs", i);
	}
	st = stats_of(s);
	CHECK(st.bd_reads == (uint64_t)wrote && st.zswpin == NPAGES,
	      "bd_reads %llu (%ld written back), zswpin %llu", U(st.bd_reads), wrote, U(st.zswpin));

	/* Freed slots are written again: the blocks behind them are still the file's. */
	long dropped = 0, more;

	for (unsigned i = 0; i < NPAGES && dropped < 4; i++) {
		const uint64_t reads = stats_of(s).bd_reads;

		ret = zf_store_get(s, OWNER, i, back, PAGE);
		CHECK(ret == 0, "get %u: %s", i, zf_strerror(ret));
		if (stats_of(s).bd_reads == reads)
			continue; /* in the pool */
		CHECK(zf_store_invalidate(s, OWNER, i, 1) == 1, "invalidate %u", i);
		gone[i] = 1;
		dropped++;
	}
	CHECK(dropped == 4, "only %ld pages were written back", dropped);
	st = stats_of(s);
	more = zf_store_writeback(s, UINT64_MAX);
	st2 = stats_of(s);
	CHECK(more > 0, "writeback into freed slots returned %ld", more);
	CHECK(st2.written_back_pages == st.written_back_pages + (uint64_t)more,
	      "written_back_pages %llu -> %llu, writeback said %ld", U(st.written_back_pages),
	      U(st2.written_back_pages), more);
	for (unsigned i = 0; i < NPAGES; i++) {
		ret = zf_store_get(s, OWNER, i, back, PAGE);
		if (gone[i]) {
			CHECK(ret == -ENOENT, "invalidated page %u: %s", i, zf_strerror(ret));
			continue;
		}
		CHECK(ret == 0, "get %u: %s", i, zf_strerror(ret));
		CHECK(memcmp(back, data[i], PAGE) == 0, "page %u differs", i);
	}

	CHECK(zf_store_invalidate(s, OWNER, 0, NPAGES) == NPAGES - 4, "invalidate all");
	st = stats_of(s);
	CHECK(st.stored_pages == 0 && st.written_back_pages == 0 && st.compr_data_size == 0,
	      "after invalidating all: stored %llu, written back %llu, compr %llu",
	      U(st.stored_pages), U(st.written_back_pages), U(st.compr_data_size));
	ret = destroy_gives_back(&s, free_before);
out:
	zf_store_destroy(s);
	return ret;
}

/* Test 2: the writeback policy when writeback cannot make room. */
static int run_policy(void)
{
	enum { NFOLIOS = 40 };
	static uint8_t data[NFOLIOS][K64], back[K64];
	const uint64_t free_before = tinyfs_free_bytes();
	int in[NFOLIOS];
	unsigned accepted = 0, refused = 0;
	zf_store_options o;
	zf_store_stats st;
	zf_store *s = NULL;
	int ret;

	zf_store_options_init(&o);
	o.codec = test_codec_name();
	o.unit = K64;
	o.engines = 2;
	o.max_pool_bytes = 256u << 10;
	o.when_full = ZF_STORE_WRITEBACK;
	o.backing_path = tinyfs_dir;
	o.backing_bytes = 2 * FS_BYTES;
	ret = zf_store_create(&o, &s);
	CHECK(ret == 0, "store_create: %s", zf_strerror(ret));
	for (unsigned i = 0; i < NFOLIOS; i++) {
		fill_random(data[i], K64, 1000 + i);
		ret = zf_store_put(s, OWNER, (uint64_t)i * 16, data[i], K64);
		CHECK(ret == 0 || ret == -ENOSPC, "put %u: %s", i, zf_strerror(ret));
		in[i] = ret == 0;
		accepted += in[i];
		refused += !in[i];
	}
	st = stats_of(s);
	printf("writeback policy: %u folios went in, %u refused; %llu pages written back, %llu "
	       "write errors, %llu limit hits\n",
	       accepted, refused, U(st.written_back_pages), U(st.bd_write_errors),
	       U(st.pool_limit_hit));
	CHECK(refused > 0, "the pool never refused a put");
	CHECK(accepted >= 4, "only %u puts went in", accepted);
	CHECK(st.reject_pool_full == refused, "reject_pool_full %llu, %u refused",
	      U(st.reject_pool_full), refused);
	CHECK(st.pool_limit_hit > 0 && st.bd_write_errors > 0, "limit hits %llu, write errors %llu",
	      U(st.pool_limit_hit), U(st.bd_write_errors));
	CHECK(st.stored_pages == accepted * 16ull && st.zswpout == accepted * 16ull &&
		      st.zswpout_units[4] == accepted,
	      "stored %llu, zswpout %llu, zswpout_64k %llu for %u folios", U(st.stored_pages),
	      U(st.zswpout), U(st.zswpout_units[4]), accepted);
	CHECK(st.stored_incompressible_pages == st.stored_pages, "incompressible %llu",
	      U(st.stored_incompressible_pages));
	CHECK(st.written_back_pages == st.bd_writes * 16 &&
		      st.written_back_pages * PAGE <= FS_BYTES,
	      "written back %llu pages, %llu writes", U(st.written_back_pages), U(st.bd_writes));
	for (unsigned i = 0; i < NFOLIOS; i++) {
		memset(back, 0x5a, K64);
		ret = zf_store_get(s, OWNER, (uint64_t)i * 16, back, K64);
		if (!in[i]) {
			CHECK(ret == -ENOENT, "refused folio %u: get says %s", i, zf_strerror(ret));
			continue;
		}
		CHECK(ret == 0, "folio %u: %s", i, zf_strerror(ret));
		CHECK(memcmp(back, data[i], K64) == 0, "folio %u differs", i);
	}
	st = stats_of(s);
	CHECK(st.decompress_fail == 0 && st.bd_read_errors == 0,
	      "decompress_fail %llu, read errors %llu", U(st.decompress_fail),
	      U(st.bd_read_errors));
	ret = destroy_gives_back(&s, free_before);
out:
	zf_store_destroy(s);
	return ret;
}

int main(void)
{
	int ret, r;

	ret = tinyfs_mount("store-enospc", FS_BYTES);
	if (ret)
		return ret;

	ret = run_writeback();
	r = run_policy();
	if (r == FAIL)
		ret = FAIL;
	tinyfs_cleanup();
	printf("%s\n", ret == PASS ? "PASS" : "FAIL");
	return ret;
}
