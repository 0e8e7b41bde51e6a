/*
 * test_backing.c - the backing tier: opening on a directory (O_TMPFILE) and on a path
 * (created and unlinked, or an existing file truncated and kept; -EBUSY for a second
 * user; bad options), slot runs (contiguity, runs across bitmap words, -ENOSPC when
 * full, reuse after free, a random sequence against a shadow model), round trips of
 * 1 B .. 2 MiB + 16 in both I/O modes (io_uring skipped where the kernel refuses it),
 * mixed read/write batches longer than the ring, bad ios, injected -EIO/-ENOSPC with
 * their per-io results and counters, and threads doing I/O at once (run under TSan).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "zfolio.h"
#include "testutil.h"
#include "../../src/backing/backing.h"

#define SLOT 4096u

static char tmpdir[64];

static int group_setup(void **state)
{
	const char *base = getenv("TMPDIR");

	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "%s/zf-backing-XXXXXX",
		 base && strlen(base) < 40 ? base : "/tmp");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	return rmdir(tmpdir); /* fails, and so fails the run, if a test left a file behind */
}

static struct backing *open_mode(uint64_t max_bytes, int mode, unsigned depth, int *err)
{
	struct backing_options o;
	struct backing *b = NULL;

	backing_options_init(&o);
	o.path = tmpdir;
	o.max_bytes = max_bytes;
	o.io_mode = mode;
	o.queue_depth = depth;
	*err = backing_open(&o, &b);
	return b;
}

static struct backing *open_ok(uint64_t max_bytes, int mode)
{
	int err;
	struct backing *b = open_mode(max_bytes, mode, 8, &err);

	assert_int_equal(err, 0);
	assert_non_null(b);
	return b;
}

/* The io_uring backing, or a skip when the kernel has no (usable) io_uring. */
static struct backing *open_uring(uint64_t max_bytes, unsigned depth)
{
	int err;
	struct backing *b = open_mode(max_bytes, BACKING_IO_URING, depth, &err);

	if (err == -ENOSYS || err == -EPERM) {
		print_message("io_uring unavailable (%s): skipped\n", zf_strerror(err));
		skip();
	}
	assert_int_equal(err, 0);
	return b;
}

static int dir_is_empty(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s)\"", tmpdir);
	return system(cmd) == 0;
}

static void fill(uint8_t *buf, size_t len, uint64_t cookie)
{
	fill_random(buf, len, cookie * 0x9e3779b97f4a7c15ULL + len);
}

static void stats(struct backing *b, struct backing_stats *st)
{
	backing_get_stats(b, st);
}

/* ---------------------------------------------------------------------------------- */

static void test_open_dir(void **state)
{
	struct backing_stats st;
	struct backing *b;

	(void)state;
	/* max_bytes rounds down to slots. */
	b = open_ok(100 * SLOT + 1000, BACKING_IO_SYNC);
	stats(b, &st);
	assert_int_equal(st.slots_total, 100);
	assert_int_equal(st.slots_used, 0);
	assert_int_equal(st.slot_size, SLOT);
	assert_int_equal(st.uring, 0);
	assert_int_equal(backing_slot_size(b), SLOT);
	/* The file has no name. */
	assert_true(dir_is_empty());
	backing_close(b);
	assert_true(dir_is_empty());
	backing_close(NULL);
}

static void test_open_path(void **state)
{
	char path[128];
	struct backing_options o;
	struct backing *b = NULL, *b2 = NULL;
	struct backing_io io;
	struct stat st;
	uint8_t buf[100];
	uint64_t slot;
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s/file", tmpdir);
	backing_options_init(&o);
	o.path = path;
	o.max_bytes = 16 * SLOT;
	o.io_mode = BACKING_IO_SYNC;

	/* Created, busy for a second user, unlinked at close. */
	assert_int_equal(backing_open(&o, &b), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(backing_open(&o, &b2), -EBUSY);
	assert_null(b2);
	assert_int_equal(stat(path, &st), 0); /* the failed open left it alone */
	backing_close(b);
	assert_int_equal(stat(path, &st), -1);
	assert_int_equal(errno, ENOENT);

	/* An existing file: truncated at open, written, emptied at close, kept. */
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(write(fd, buf, sizeof(buf)), sizeof(buf));
	close(fd);
	assert_int_equal(backing_open(&o, &b), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(backing_alloc(b, 3 * SLOT, &slot), 0);
	io = (struct backing_io){
		.slot = slot, .buf = buf, .len = sizeof(buf), .op = BACKING_WRITE
	};
	assert_int_equal(backing_rw(b, &io, 1), 0);
	assert_int_equal(io.result, 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, slot * SLOT + sizeof(buf));
	backing_close(b);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(unlink(path), 0);

	/* Bad options. */
	o.path = NULL;
	assert_int_equal(backing_open(&o, &b), -EINVAL);
	assert_null(b);
	o.path = path;
	o.slot_size = 1000;
	assert_int_equal(backing_open(&o, &b), -EINVAL);
	o.slot_size = 256;
	assert_int_equal(backing_open(&o, &b), -EINVAL);
	o.slot_size = SLOT;
	o.max_bytes = SLOT - 1;
	assert_int_equal(backing_open(&o, &b), -EINVAL);
	o.max_bytes = SLOT;
	o.queue_depth = 0;
	assert_int_equal(backing_open(&o, &b), -EINVAL);
	o.queue_depth = 8;
	o.io_mode = 7;
	assert_int_equal(backing_open(&o, &b), -EINVAL);
	o.io_mode = BACKING_IO_SYNC;
	assert_int_equal(backing_open(NULL, &b), -EINVAL);
	assert_int_equal(backing_open(&o, NULL), -EINVAL);
	assert_int_equal(stat(path, &st), -1); /* no failed open created it */
	snprintf(path, sizeof(path), "%s/no-such-dir/file", tmpdir);
	assert_int_equal(backing_open(&o, &b), -ENOENT);
	/* Not a regular file. */
	o.path = "/dev/null";
	assert_int_equal(backing_open(&o, &b), -EINVAL);
	assert_null(b);
}

/* ---------------------------------------------------------------------------------- */

static void test_alloc_runs(void **state)
{
	struct backing *b;
	struct backing_stats st;
	uint64_t s[8], slot;

	(void)state;
	b = open_ok(200 * SLOT, BACKING_IO_SYNC);
	assert_int_equal(backing_slots_for(b, 1), 1);
	assert_int_equal(backing_slots_for(b, SLOT), 1);
	assert_int_equal(backing_slots_for(b, SLOT + 1), 2);
	assert_int_equal(backing_slots_for(b, 64 << 10), 16);
	assert_int_equal(backing_slots_for(b, ZF_UNIT_MAX + 16), 513);
	assert_int_equal(backing_alloc(b, 0, &slot), -EINVAL);
	assert_int_equal(backing_alloc(b, ZF_UNIT_MAX + 16, &slot), -ENOSPC);

	/* Next fit: runs are laid one after the other, across word boundaries. */
	assert_int_equal(backing_alloc(b, 1, &s[0]), 0);
	assert_int_equal(backing_alloc(b, SLOT, &s[1]), 0);
	assert_int_equal(backing_alloc(b, SLOT + 1, &s[2]), 0);
	assert_int_equal(backing_alloc(b, 60 * SLOT, &s[3]), 0); /* 4..63 */
	assert_int_equal(backing_alloc(b, 10 * SLOT, &s[4]), 0); /* 64..73 */
	assert_int_equal(backing_alloc(b, 100 * SLOT, &s[5]), 0); /* 74..173, 2 words */
	assert_int_equal(s[0], 0);
	assert_int_equal(s[1], 1);
	assert_int_equal(s[2], 2);
	assert_int_equal(s[3], 4);
	assert_int_equal(s[4], 64);
	assert_int_equal(s[5], 74);
	stats(b, &st);
	assert_int_equal(st.slots_used, 174);
	/* 26 left: 27 do not fit, 26 do, then nothing. */
	assert_int_equal(backing_alloc(b, 27 * SLOT, &slot), -ENOSPC);
	assert_int_equal(backing_alloc(b, 26 * SLOT, &s[6]), 0);
	assert_int_equal(s[6], 174);
	assert_int_equal(backing_alloc(b, 1, &slot), -ENOSPC);
	stats(b, &st);
	assert_int_equal(st.slots_used, 200);

	/* Reuse after free: the freed run, no longer. Frees at both ends of a word. */
	backing_free(b, s[4], 10 * SLOT);
	assert_int_equal(backing_alloc(b, 11 * SLOT, &slot), -ENOSPC);
	assert_int_equal(backing_alloc(b, 10 * SLOT, &slot), 0);
	assert_int_equal(slot, 64);
	/* Two free neighbours make one run: 1..2 freed with 2..3 (slots 1, 2, 3). */
	backing_free(b, s[1], SLOT);
	backing_free(b, s[2], SLOT + 1);
	assert_int_equal(backing_alloc(b, 4 * SLOT, &slot), -ENOSPC);
	assert_int_equal(backing_alloc(b, 3 * SLOT, &slot), 0);
	assert_int_equal(slot, 1);
	/* A run that crosses a word boundary, freed in two parts. */
	backing_free(b, s[3], 60 * SLOT); /* 4..63 */
	backing_free(b, s[4], 10 * SLOT); /* 64..73 */
	assert_int_equal(backing_alloc(b, 70 * SLOT, &slot), 0);
	assert_int_equal(slot, 4);
	stats(b, &st);
	assert_int_equal(st.slots_used, 200);
	for (uint64_t i = 0; i < 200; i++)
		backing_free(b, i, 1);
	stats(b, &st);
	assert_int_equal(st.slots_used, 0);
	/* Empty again: the largest run is the whole file. */
	assert_int_equal(backing_alloc(b, 200 * SLOT, &slot), 0);
	assert_int_equal(slot, 0);
	backing_free(b, slot, 200 * SLOT);
	backing_close(b);
}

/* Random allocs and frees against a shadow map: runs are contiguous and never overlap. */
static void test_alloc_model(void **state)
{
	enum { TOTAL = 1000, LIVE = 256 };
	uint8_t shadow[TOTAL] = { 0 };
	uint64_t slots[LIVE], seed = 42, used = 0;
	uint32_t lens[LIVE] = { 0 };
	struct backing_stats st;
	struct backing *b;

	(void)state;
	b = open_ok(TOTAL * SLOT, BACKING_IO_SYNC);
	for (int round = 0; round < 20000; round++) {
		const unsigned i = (unsigned)(test_rand(&seed) % LIVE);

		if (lens[i]) {
			const uint64_t n = backing_slots_for(b, lens[i]);

			for (uint64_t k = 0; k < n; k++)
				shadow[slots[i] + k] = 0;
			backing_free(b, slots[i], lens[i]);
			used -= n;
			lens[i] = 0;
		} else {
			const uint32_t len = 1 + (uint32_t)(test_rand(&seed) % (40 * SLOT));
			const uint64_t n = backing_slots_for(b, len);
			int ret = backing_alloc(b, len, &slots[i]);

			if (ret == -ENOSPC) {
				/* Then the shadow has no free run of n either. */
				uint64_t run = 0, best = 0;

				for (unsigned k = 0; k < TOTAL; k++) {
					run = shadow[k] ? 0 : run + 1;
					best = run > best ? run : best;
				}
				assert_true(best < n);
				continue;
			}
			assert_int_equal(ret, 0);
			assert_true(slots[i] + n <= TOTAL);
			for (uint64_t k = 0; k < n; k++) {
				assert_int_equal(shadow[slots[i] + k], 0);
				shadow[slots[i] + k] = 1;
			}
			used += n;
			lens[i] = len;
		}
		stats(b, &st);
		assert_int_equal(st.slots_used, used);
	}
	for (unsigned i = 0; i < LIVE; i++) {
		if (lens[i])
			backing_free(b, slots[i], lens[i]);
	}
	stats(b, &st);
	assert_int_equal(st.slots_used, 0);
	backing_close(b);
}

/* ---------------------------------------------------------------------------------- */

static const uint32_t sizes[] = { 1, 100, SLOT - 1, SLOT, SLOT + 1, 64 << 10, ZF_UNIT_MAX + 16 };

/* Writes each size, then reads all back; neighbours must not clobber each other. */
static void round_trips(struct backing *b)
{
	enum { N = ZF_ARRAY_SIZE(sizes) };
	uint8_t *want[N], *got[N];
	struct backing_io io[N];
	uint64_t slot[N], bytes = 0;
	struct backing_stats st;

	for (unsigned i = 0; i < N; i++) {
		want[i] = malloc(sizes[i]);
		got[i] = malloc(sizes[i]);
		assert_non_null(want[i]);
		assert_non_null(got[i]);
		fill(want[i], sizes[i], i);
		memset(got[i], 0xa5, sizes[i]);
		assert_int_equal(backing_alloc(b, sizes[i], &slot[i]), 0);
		bytes += sizes[i];
	}
	/* One at a time, in reverse order (so the file has holes while it grows). */
	for (unsigned i = N; i-- > 0;) {
		io[i] = (struct backing_io){ slot[i], want[i], sizes[i], BACKING_WRITE, 1 };
		assert_int_equal(backing_rw(b, &io[i], 1), 0);
		assert_int_equal(io[i].result, 0);
	}
	for (unsigned i = 0; i < N; i++) {
		io[i] = (struct backing_io){ slot[i], got[i], sizes[i], BACKING_READ, 1 };
		assert_int_equal(backing_rw(b, &io[i], 1), 0);
		assert_int_equal(io[i].result, 0);
		assert_memory_equal(got[i], want[i], sizes[i]);
	}
	/* Then as one batch each way, rewritten with new contents. */
	for (unsigned i = 0; i < N; i++) {
		fill(want[i], sizes[i], 100 + i);
		memset(got[i], 0x5a, sizes[i]);
		io[i] = (struct backing_io){ slot[i], want[i], sizes[i], BACKING_WRITE, 1 };
	}
	assert_int_equal(backing_rw(b, io, N), 0);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(io[i].result, 0);
		io[i] = (struct backing_io){ slot[i], got[i], sizes[i], BACKING_READ, 1 };
	}
	assert_int_equal(backing_rw(b, io, N), 0);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(io[i].result, 0);
		assert_memory_equal(got[i], want[i], sizes[i]);
	}
	assert_int_equal(backing_rw(b, io, 0), 0);
	stats(b, &st);
	assert_int_equal(st.writes, 2 * N);
	assert_int_equal(st.reads, 2 * N);
	assert_int_equal(st.bytes_written, 2 * bytes);
	assert_int_equal(st.bytes_read, 2 * bytes);
	assert_int_equal(st.read_errors + st.write_errors, 0);
	for (unsigned i = 0; i < N; i++) {
		backing_free(b, slot[i], sizes[i]);
		free(want[i]);
		free(got[i]);
	}
	stats(b, &st);
	assert_int_equal(st.slots_used, 0);
}

static void test_rw_sync(void **state)
{
	struct backing *b;

	(void)state;
	b = open_ok(8 << 20, BACKING_IO_SYNC);
	round_trips(b);
	backing_close(b);
}

static void test_rw_uring(void **state)
{
	struct backing_stats st;
	struct backing *b;

	(void)state;
	b = open_uring(8 << 20, 4);
	stats(b, &st);
	assert_int_equal(st.uring, 1);
	round_trips(b);
	stats(b, &st);
	assert_int_equal(st.uring_ios, 4 * ZF_ARRAY_SIZE(sizes)); /* everything */
	backing_close(b);
}

static void test_rw_auto(void **state)
{
	struct backing_stats st;
	struct backing *b;

	(void)state;
	b = open_ok(8 << 20, BACKING_IO_AUTO);
	round_trips(b);
	/* With a ring, only the batch of reads went through it. */
	stats(b, &st);
	assert_int_equal(st.uring_ios, st.uring ? ZF_ARRAY_SIZE(sizes) : 0);
	backing_close(b);
}

/*
 * A batch much longer than the ring (depth 4), then batches mixing reads of the old
 * objects with writes of new ones, and a read that overlaps nothing written.
 */
static void mixed_batches(struct backing *b)
{
	enum { N = 96 };
	static uint8_t data[N][3 * SLOT], back[N][3 * SLOT];
	struct backing_io io[N];
	uint64_t slot[N], wbytes = 0, rbytes = 0;
	uint32_t len[N];
	struct backing_stats st;
	uint64_t seed = 7;

	for (unsigned i = 0; i < N; i++) {
		len[i] = 1 + (uint32_t)(test_rand(&seed) % sizeof(data[i]));
		fill(data[i], len[i], 1000 + i);
		assert_int_equal(backing_alloc(b, len[i], &slot[i]), 0);
		io[i] = (struct backing_io){ slot[i], data[i], len[i], BACKING_WRITE, 1 };
		wbytes += len[i];
	}
	assert_int_equal(backing_rw(b, io, N / 2), 0);
	/* Evens read the first half back, odds write the second half. */
	for (unsigned i = 0; i < N; i++) {
		const unsigned k = i % 2 == 0 ? i / 2 : N / 2 + i / 2;
		const int op = i % 2 == 0 ? BACKING_READ : BACKING_WRITE;

		memset(back[k], 0, sizeof(back[k]));
		io[i] = (struct backing_io){ slot[k], op == BACKING_READ ? back[k] : data[k],
					     len[k], op, 1 };
		if (op == BACKING_READ)
			rbytes += len[k];
	}
	assert_int_equal(backing_rw(b, io, N), 0);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(io[i].result, 0);
	for (unsigned k = 0; k < N / 2; k++)
		assert_memory_equal(back[k], data[k], len[k]);
	/* Everything back, in one batch. */
	for (unsigned i = 0; i < N; i++) {
		memset(back[i], 0, sizeof(back[i]));
		io[i] = (struct backing_io){ slot[i], back[i], len[i], BACKING_READ, 1 };
		rbytes += len[i];
	}
	assert_int_equal(backing_rw(b, io, N), 0);
	for (unsigned i = 0; i < N; i++) {
		assert_int_equal(io[i].result, 0);
		assert_memory_equal(back[i], data[i], len[i]);
	}
	stats(b, &st);
	assert_int_equal(st.writes, N);
	assert_int_equal(st.reads, N / 2 + N);
	assert_int_equal(st.bytes_written, wbytes);
	assert_int_equal(st.bytes_read, rbytes);
	for (unsigned i = 0; i < N; i++)
		backing_free(b, slot[i], len[i]);
}

static void test_batch_sync(void **state)
{
	struct backing *b;

	(void)state;
	b = open_ok(4 << 20, BACKING_IO_SYNC);
	mixed_batches(b);
	backing_close(b);
}

static void test_batch_uring(void **state)
{
	struct backing *b;

	(void)state;
	b = open_uring(4 << 20, 4);
	mixed_batches(b);
	backing_close(b);
}

/* ---------------------------------------------------------------------------------- */

/* Bad ios fail alone, with -EINVAL; a read past what was written fails with -EIO. */
static void bad_ios(struct backing *b)
{
	uint8_t buf[SLOT], back[SLOT];
	struct backing_io io[6];
	struct backing_stats st;
	uint64_t slot, end;

	fill(buf, sizeof(buf), 5);
	assert_int_equal(backing_alloc(b, SLOT, &slot), 0);
	assert_int_equal(backing_alloc(b, SLOT, &end), 0);
	io[0] = (struct backing_io){ slot, buf, SLOT, BACKING_WRITE, 1 };
	io[1] = (struct backing_io){ 16, buf, 1, BACKING_WRITE, 1 }; /* past the end */
	io[2] = (struct backing_io){ 15, buf, SLOT + 1, BACKING_READ, 1 }; /* runs past it */
	io[3] = (struct backing_io){ slot, buf, 0, BACKING_READ, 1 };
	io[4] = (struct backing_io){ slot, NULL, 1, BACKING_READ, 1 };
	io[5] = (struct backing_io){ slot, buf, 1, 9, 1 };
	assert_int_equal(backing_rw(b, io, 6), 5);
	assert_int_equal(io[0].result, 0);
	for (unsigned i = 1; i < 6; i++)
		assert_int_equal(io[i].result, -EINVAL);
	/* Slot end was never written and lies past the end of the file. */
	io[0] = (struct backing_io){ end, back, SLOT, BACKING_READ, 1 };
	io[1] = (struct backing_io){ slot, back, SLOT, BACKING_READ, 1 };
	assert_int_equal(backing_rw(b, io, 1), 1);
	assert_int_equal(io[0].result, -EIO);
	assert_int_equal(backing_rw(b, &io[1], 1), 0);
	assert_memory_equal(back, buf, SLOT);
	/* 100 bytes at the end of the file, read as 4096: short, resubmitted, then -EIO. */
	io[0] = (struct backing_io){ end, buf, 100, BACKING_WRITE, 1 };
	assert_int_equal(backing_rw(b, io, 1), 0);
	memset(back, 0, sizeof(back));
	io[0] = (struct backing_io){ end, back, SLOT, BACKING_READ, 1 };
	assert_int_equal(backing_rw(b, io, 1), 1);
	assert_int_equal(io[0].result, -EIO);
	assert_memory_equal(back, buf, 100); /* the part that was there was read */
	stats(b, &st);
	assert_int_equal(st.writes, 2);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.write_errors, 1);
	assert_int_equal(st.read_errors, 6); /* 3 bad, a bad op, 2 reads past the end */
	backing_free(b, slot, SLOT);
	backing_free(b, end, SLOT);
}

static void test_bad_io_sync(void **state)
{
	struct backing *b;

	(void)state;
	b = open_ok(16 * SLOT, BACKING_IO_SYNC);
	bad_ios(b);
	backing_close(b);
}

static void test_bad_io_uring(void **state)
{
	struct backing *b;

	(void)state;
	b = open_uring(16 * SLOT, 4);
	bad_ios(b);
	backing_close(b);
}

/*
 * Injected errors: the chosen io fails with the chosen error, touches neither file nor
 * buffer, and is counted; the rest of its batch goes through; it happens once.
 */
static void injection(struct backing *b)
{
	enum { N = 5, LEN = 3000 };
	static uint8_t old[N][LEN], data[N][LEN], back[N][LEN];
	struct backing_io io[N];
	struct backing_stats st;
	uint64_t slot[N];

	for (unsigned i = 0; i < N; i++) {
		fill(old[i], LEN, i);
		fill(data[i], LEN, 50 + i);
		assert_int_equal(backing_alloc(b, LEN, &slot[i]), 0);
		io[i] = (struct backing_io){ slot[i], old[i], LEN, BACKING_WRITE, 1 };
	}
	assert_int_equal(backing_rw(b, io, N), 0);

	/* The 3rd write fails with -EIO; the next batch has none. */
	backing_inject_error(b, BACKING_WRITE, 2, -EIO);
	for (unsigned i = 0; i < N; i++)
		io[i] = (struct backing_io){ slot[i], data[i], LEN, BACKING_WRITE, 1 };
	assert_int_equal(backing_rw(b, io, N), 1);
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(io[i].result, i == 2 ? -EIO : 0);
	stats(b, &st);
	assert_int_equal(st.writes, 2 * N - 1);
	assert_int_equal(st.write_errors, 1);
	assert_int_equal(st.bytes_written, (2 * N - 1) * LEN);

	/* The file still holds the old object where the write failed. */
	for (unsigned i = 0; i < N; i++)
		io[i] = (struct backing_io){ slot[i], back[i], LEN, BACKING_READ, 1 };
	assert_int_equal(backing_rw(b, io, N), 0);
	for (unsigned i = 0; i < N; i++)
		assert_memory_equal(back[i], i == 2 ? old[i] : data[i], LEN);

	/* -ENOSPC on the first write, across two batches: the 2nd batch's first io. */
	backing_inject_error(b, BACKING_WRITE, 1, -ENOSPC);
	io[0] = (struct backing_io){ slot[2], data[2], LEN, BACKING_WRITE, 1 };
	assert_int_equal(backing_rw(b, io, 1), 0);
	io[0] = (struct backing_io){ slot[3], data[3], LEN, BACKING_WRITE, 1 };
	io[1] = (struct backing_io){ slot[4], data[4], LEN, BACKING_WRITE, 1 };
	assert_int_equal(backing_rw(b, io, 2), 1);
	assert_int_equal(io[0].result, -ENOSPC);
	assert_int_equal(io[1].result, 0);

	/* Reads: the buffer is left alone; reads do not count toward write injections. */
	backing_inject_error(b, BACKING_READ, 0, -EIO);
	backing_inject_error(b, BACKING_WRITE, 0, -EIO);
	backing_inject_error(b, BACKING_WRITE, 0, 0); /* disarmed */
	memset(back[0], 0x77, LEN);
	io[0] = (struct backing_io){ slot[0], back[0], LEN, BACKING_READ, 1 };
	io[1] = (struct backing_io){ slot[1], back[1], LEN, BACKING_READ, 1 };
	io[2] = (struct backing_io){ slot[2], data[2], LEN, BACKING_WRITE, 1 };
	assert_int_equal(backing_rw(b, io, 3), 1);
	assert_int_equal(io[0].result, -EIO);
	assert_int_equal(io[1].result, 0);
	assert_int_equal(io[2].result, 0);
	for (unsigned i = 0; i < LEN; i++)
		assert_int_equal(back[0][i], 0x77);
	assert_memory_equal(back[1], data[1], LEN);

	stats(b, &st);
	assert_int_equal(st.writes, 2 * N - 1 + 3);
	assert_int_equal(st.write_errors, 2);
	assert_int_equal(st.reads, N + 1);
	assert_int_equal(st.read_errors, 1);
	for (unsigned i = 0; i < N; i++)
		backing_free(b, slot[i], LEN);
}

static void test_inject_sync(void **state)
{
	struct backing *b;

	(void)state;
	b = open_ok(64 * SLOT, BACKING_IO_SYNC);
	injection(b);
	backing_close(b);
}

static void test_inject_uring(void **state)
{
	struct backing *b;

	(void)state;
	b = open_uring(64 * SLOT, 4);
	injection(b);
	backing_close(b);
}

/*
 * A real short write: under RLIMIT_FSIZE a write crossing the limit writes up to it and
 * returns short; the rest, resubmitted at the limit, fails with -EFBIG (SIGXFSZ is
 * ignored). The bytes below the limit are in place, so the resubmission was at the
 * right offset.
 */
static struct rlimit saved_fsize;

static int restore_fsize(void **state)
{
	(void)state;
	signal(SIGXFSZ, SIG_DFL);
	return setrlimit(RLIMIT_FSIZE, &saved_fsize);
}

static void short_write(struct backing *b)
{
	enum { LIMIT = 6000, LEN = 3 * SLOT };
	static uint8_t data[LEN], back[LEN];
	struct rlimit lim;
	struct backing_io io;
	struct backing_stats st;
	uint64_t slot;

	fill(data, LEN, 77);
	assert_int_equal(backing_alloc(b, LEN, &slot), 0);
	assert_int_equal(slot, 0);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved_fsize), 0);
	lim = saved_fsize;
	lim.rlim_cur = LIMIT;
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	io = (struct backing_io){ slot, data, LEN, BACKING_WRITE, 1 };
	assert_int_equal(backing_rw(b, &io, 1), 1);
	assert_int_equal(io.result, -EFBIG);
	assert_int_equal(restore_fsize(NULL), 0);
	/* The first LIMIT bytes were written; reading LEN is short, then -EIO. */
	io = (struct backing_io){ slot, back, LIMIT, BACKING_READ, 1 };
	assert_int_equal(backing_rw(b, &io, 1), 0);
	assert_memory_equal(back, data, LIMIT);
	stats(b, &st);
	assert_int_equal(st.write_errors, 1);
	assert_int_equal(st.writes, 0);
	assert_int_equal(st.bytes_written, 0);
	/* The caller frees the slots of its failed write, and may write them again. */
	backing_free(b, slot, LEN);
	assert_int_equal(backing_alloc(b, LEN, &slot), 0);
	io = (struct backing_io){ slot, data, LEN, BACKING_WRITE, 1 };
	assert_int_equal(backing_rw(b, &io, 1), 0);
	io = (struct backing_io){ slot, back, LEN, BACKING_READ, 1 };
	assert_int_equal(backing_rw(b, &io, 1), 0);
	assert_memory_equal(back, data, LEN);
	backing_free(b, slot, LEN);
}

static void test_short_write_sync(void **state)
{
	struct backing *b;

	(void)state;
	b = open_ok(16 * SLOT, BACKING_IO_SYNC);
	short_write(b);
	backing_close(b);
}

static void test_short_write_uring(void **state)
{
	struct backing *b;

	(void)state;
	b = open_uring(16 * SLOT, 4);
	short_write(b);
	backing_close(b);
}

/* ---------------------------------------------------------------------------------- */

/*
 * Threads each write their own objects in batches (a writeback) and read them back one
 * at a time (faults), rewriting as they go; every read returns its own bytes.
 */
enum { THREADS = 4, OBJS = 24, ROUNDS = 12, OBJ_MAX = 5 * SLOT };

struct worker {
	struct backing *b;
	unsigned id;
	int failed;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	static uint8_t bufs[THREADS][OBJS][OBJ_MAX];
	static _Thread_local uint8_t back[4][OBJ_MAX];
	uint64_t slot[OBJS], seed = 99 + w->id;
	uint32_t len[OBJS];
	struct backing_io io[OBJS];

	for (unsigned i = 0; i < OBJS; i++) {
		len[i] = 1 + (uint32_t)(test_rand(&seed) % OBJ_MAX);
		if (backing_alloc(w->b, len[i], &slot[i]) < 0)
			w->failed = 1;
	}
	for (unsigned r = 0; r < ROUNDS && !w->failed; r++) {
		for (unsigned i = 0; i < OBJS; i++) {
			fill(bufs[w->id][i], len[i], (uint64_t)w->id << 32 | r << 16 | i);
			io[i] = (struct backing_io){ slot[i], bufs[w->id][i], len[i], BACKING_WRITE,
						     1 };
		}
		if (backing_rw(w->b, io, OBJS) != 0)
			w->failed = 1;
		/* Half one at a time (faults), half in batches of 4 (readahead). */
		for (unsigned i = 0; i < OBJS / 2; i++) {
			struct backing_io one = { slot[i], back[0], len[i], BACKING_READ, 1 };

			if (backing_rw(w->b, &one, 1) != 0 ||
			    memcmp(back[0], bufs[w->id][i], len[i]) != 0)
				w->failed = 1;
		}
		for (unsigned i = OBJS / 2; i < OBJS; i += 4) {
			for (unsigned k = 0; k < 4; k++)
				io[k] = (struct backing_io){ slot[i + k], back[k], len[i + k],
							     BACKING_READ, 1 };
			if (backing_rw(w->b, io, 4) != 0)
				w->failed = 1;
			for (unsigned k = 0; k < 4; k++) {
				if (memcmp(back[k], bufs[w->id][i + k], len[i + k]) != 0)
					w->failed = 1;
			}
		}
	}
	for (unsigned i = 0; i < OBJS; i++)
		backing_free(w->b, slot[i], len[i]);
	return NULL;
}

static void threads(struct backing *b)
{
	pthread_t t[THREADS];
	struct worker w[THREADS];
	struct backing_stats st;

	for (unsigned i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ b, i, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_false(w[i].failed);
	}
	stats(b, &st);
	assert_int_equal(st.writes, THREADS * ROUNDS * OBJS);
	assert_int_equal(st.reads, THREADS * ROUNDS * OBJS);
	assert_int_equal(st.read_errors + st.write_errors, 0);
	assert_int_equal(st.slots_used, 0);
	assert_true(st.uring_ios <= st.reads + st.writes);
	print_message("%llu of %llu ios through the ring; %llu read batches found it busy with "
		      "writes and used pread\n",
		      (unsigned long long)st.uring_ios, (unsigned long long)(st.reads + st.writes),
		      (unsigned long long)st.read_busy_sync);
}

static void test_threads_auto(void **state)
{
	struct backing *b;

	(void)state;
	b = open_ok(THREADS * OBJS * OBJ_MAX + 64 * SLOT, BACKING_IO_AUTO);
	threads(b);
	backing_close(b);
}

static void test_threads_uring(void **state)
{
	struct backing *b;

	(void)state;
	b = open_uring(THREADS * OBJS * OBJ_MAX + 64 * SLOT, 8);
	threads(b);
	backing_close(b);
}

static void test_threads_sync(void **state)
{
	struct backing *b;

	(void)state;
	b = open_ok(THREADS * OBJS * OBJ_MAX + 64 * SLOT, BACKING_IO_SYNC);
	threads(b);
	backing_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_dir),
		cmocka_unit_test(test_open_path),
		cmocka_unit_test(test_alloc_runs),
		cmocka_unit_test(test_alloc_model),
		cmocka_unit_test(test_rw_sync),
		cmocka_unit_test(test_rw_uring),
		cmocka_unit_test(test_rw_auto),
		cmocka_unit_test(test_batch_sync),
		cmocka_unit_test(test_batch_uring),
		cmocka_unit_test(test_bad_io_sync),
		cmocka_unit_test(test_bad_io_uring),
		cmocka_unit_test(test_inject_sync),
		cmocka_unit_test(test_inject_uring),
		cmocka_unit_test_teardown(test_short_write_sync, restore_fsize),
		cmocka_unit_test_teardown(test_short_write_uring, restore_fsize),
		cmocka_unit_test(test_threads_auto),
		cmocka_unit_test(test_threads_uring),
		cmocka_unit_test(test_threads_sync),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
