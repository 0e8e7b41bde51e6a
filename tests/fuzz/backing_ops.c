/*
 * backing_ops.c - the backing tier's op-stream interpreter and its shadow model
 * (backing_ops.h has the input format, the ops and what the model holds).
 *
 * The model mirrors the file byte for byte (at most BOP_MAX_FILE bytes) and the slot
 * bitmap slot for slot, so every read's bytes and every allocation's slot are checked
 * exactly. It runs in one thread: the results the model checks do not depend on timing,
 * except which of a batch's ios runs first, which only matters for a read past the end
 * of the file in a batch whose writes extend it (either result is taken).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backing_ops.h"
#include "op_report.h"
#include "../../src/backing/backing.h"

#if defined(__clang__) && __clang_major__ >= 13
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define NO_COVERAGE
#endif

#define ULL(x) ((unsigned long long)(x))

enum path_kind { PATH_DIR = 0, PATH_NEW = 1, PATH_OLD = 2 };

struct obj {
	uint64_t slot;
	uint32_t len, nslots;
};

/* What the model expects of one io of a batch. */
enum io_expect { IO_OK, IO_ERR, IO_OK_OR_EIO };

struct planned {
	struct backing_io io;
	int expect; /* enum io_expect */
	int err; /* for IO_ERR */
	int obj; /* the object, -1 for an invalid io */
	int own_buf; /* run_batch() frees io.buf */
};

static const char *const op_names[BOP_NR_CODES] = {
	[BOP_ALLOC] = "alloc",	      [BOP_BURST] = "burst",
	[BOP_FREE] = "free",	      [BOP_FREE_STRIDE] = "free-stride",
	[BOP_WRITE] = "write",	      [BOP_READ] = "read",
	[BOP_MIXED] = "mixed",	      [BOP_BAD] = "bad",
	[BOP_INJECT] = "inject",      [BOP_STATS] = "stats",
	[BOP_VERIFY] = "verify",      [BOP_REOPEN] = "reopen",
	[BOP_SECOND] = "second-open",
};

static struct backing_ops_counts counts;
static const char *context;
static char tmpdir[256];

static struct {
	struct backing *b;
	struct backing_options o;
	char path[300];
	int path_kind;
	int uring;
	uint64_t total; /* slots */
	uint8_t *used; /* per slot */
	uint64_t nused, cursor;
	uint8_t *img; /* the file's bytes */
	uint64_t eof; /* the end of what was written */
	struct obj objs[BOP_MAX_OBJECTS];
	unsigned nobjs;
	struct backing_stats E;
	struct {
		int armed, err;
		uint64_t left;
	} inj[2];
	uint64_t budget, seed;

	const uint8_t *data;
	size_t size, op_no, offset;
	const char *op_name;
	uint8_t rec[BOP_RECORD];
} R;

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (context)
		fprintf(stderr, "backing_ops: %s\n", context);
	fprintf(stderr,
		"backing_ops: op %zu (%s), record at byte %zu "
		"[%02x %02x %02x %02x %02x %02x %02x %02x] of %zu; slots %llu of %u bytes, "
		"io_mode %d (ring %d), queue_depth %u, path kind %d; %u objects, %llu slots "
		"used, file end %llu: ",
		R.op_no, R.op_name ? R.op_name : "setup", R.offset, R.rec[0], R.rec[1], R.rec[2],
		R.rec[3], R.rec[4], R.rec[5], R.rec[6], R.rec[7], R.size, ULL(R.total),
		R.o.slot_size, R.o.io_mode, R.uring, R.o.queue_depth, R.path_kind, R.nobjs,
		ULL(R.nused), ULL(R.eof));
	va_start(ap, fmt);
	op_report_end("backing_ops", "ZF_BACKING_DUMP", R.data, R.size, fmt, ap);
}

void backing_ops_set_context(const char *ctx)
{
	context = ctx;
}

const struct backing_ops_counts *backing_ops_counts(void)
{
	return &counts;
}

NO_COVERAGE static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	CHECK(p, "out of memory in the model (%zu bytes)", n);
	return p;
}

/* Bytes no two writes share: a read of the wrong slot shows. */
NO_COVERAGE static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t s = mix64(seed) | 1;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		memcpy(p + i, &s, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)(s >> (8 * (i % 8))) ^ 0x5a;
}

NO_COVERAGE static uint64_t slots_for(uint64_t len)
{
	return (len + R.o.slot_size - 1) / R.o.slot_size;
}

/* ---------------------------------------------------------------------------------- */
/* The file and its slots                                                             */
/* ---------------------------------------------------------------------------------- */

static void rm_tmpdir(void)
{
	rmdir(tmpdir);
}

static const char *get_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR");

		snprintf(tmpdir, sizeof(tmpdir), "%s/zf-fuzz-backing-XXXXXX",
			 base && *base ? base : "/tmp");
		CHECK(mkdtemp(tmpdir), "mkdtemp(%s) failed", tmpdir);
		atexit(rm_tmpdir);
	}
	return tmpdir;
}

/* The entries of the temporary directory other than name (NULL: any). */
static unsigned dir_entries(const char *except)
{
	DIR *d = opendir(get_tmpdir());
	struct dirent *e;
	unsigned n = 0;

	CHECK(d, "opendir(%s) failed", tmpdir);
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    (!except || strcmp(e->d_name, except)))
			n++;
	}
	closedir(d);
	return n;
}

/* Makes the file an existing-file backing takes over: old bytes, which it must drop. */
static void make_old_file(void)
{
	uint8_t junk[4096];
	FILE *f = fopen(R.path, "wb");

	memset(junk, 0xee, sizeof(junk));
	CHECK(f, "cannot make %s", R.path);
	for (unsigned i = 0; i < 17; i++)
		CHECK(fwrite(junk, 1, sizeof(junk), f) == sizeof(junk), "cannot write %s", R.path);
	CHECK(fclose(f) == 0, "cannot write %s", R.path);
}

NO_COVERAGE static void check_stats(const char *what)
{
	struct backing_stats st;

	backing_get_stats(R.b, &st);
	CHECK(st.slots_total == R.total && st.slots_used == R.nused && st.reads == R.E.reads &&
		      st.writes == R.E.writes && st.bytes_read == R.E.bytes_read &&
		      st.bytes_written == R.E.bytes_written && st.read_errors == R.E.read_errors &&
		      st.write_errors == R.E.write_errors && st.uring_ios == R.E.uring_ios &&
		      st.read_busy_sync == 0 && st.slot_size == R.o.slot_size &&
		      st.uring == R.uring,
	      "%s: stats: slots %llu/%llu used %llu/%llu, reads %llu/%llu (%llu/%llu bytes, "
	      "%llu/%llu errors), writes %llu/%llu (%llu/%llu bytes, %llu/%llu errors), ring ios "
	      "%llu/%llu, read_busy_sync %llu, slot_size %u, uring %d/%d (got/expected)",
	      what, ULL(st.slots_total), ULL(R.total), ULL(st.slots_used), ULL(R.nused),
	      ULL(st.reads), ULL(R.E.reads), ULL(st.bytes_read), ULL(R.E.bytes_read),
	      ULL(st.read_errors), ULL(R.E.read_errors), ULL(st.writes), ULL(R.E.writes),
	      ULL(st.bytes_written), ULL(R.E.bytes_written), ULL(st.write_errors),
	      ULL(R.E.write_errors), ULL(st.uring_ios), ULL(R.E.uring_ios), ULL(st.read_busy_sync),
	      st.slot_size, st.uring, R.uring);
}

/* Opens the backing of R.o, and resets the model to an empty file. */
static void open_backing(void)
{
	struct backing_stats st;
	int ret;

	if (R.path_kind == PATH_NEW)
		unlink(R.path);
	else if (R.path_kind == PATH_OLD)
		make_old_file();
	ret = backing_open(&R.o, &R.b);
	if (R.o.io_mode == BACKING_IO_URING && (ret == -ENOSYS || ret == -EPERM)) {
		/* No io_uring here (kernel, seccomp): the same scenario without it. */
		CHECK(!R.b, "a failed backing_open set its backing");
		R.o.io_mode = BACKING_IO_SYNC;
		ret = backing_open(&R.o, &R.b);
	}
	CHECK(ret == 0 && R.b, "backing_open(%s): %d", R.path, ret);
	backing_get_stats(R.b, &st);
	CHECK(R.o.io_mode != BACKING_IO_URING || st.uring, "io_mode URING without a ring");
	CHECK(R.o.io_mode != BACKING_IO_SYNC || !st.uring, "io_mode SYNC with a ring");
	R.uring = st.uring;
	if (R.path_kind == PATH_DIR)
		CHECK(dir_entries(NULL) == 0, "an unnamed backing file shows in %s", tmpdir);
	memset(R.used, 0, R.total);
	memset(R.img, 0, R.total * R.o.slot_size);
	memset(&R.E, 0, sizeof(R.E));
	memset(R.inj, 0, sizeof(R.inj));
	R.nused = R.cursor = R.eof = 0;
	R.nobjs = 0;
	check_stats("a new backing");
}

/* Closes the backing; the file is gone, or left empty, as its kind says. */
static void close_backing(void)
{
	struct stat st;

	backing_close(R.b);
	R.b = NULL;
	switch (R.path_kind) {
	case PATH_NEW:
		CHECK(stat(R.path, &st) != 0 && errno == ENOENT,
		      "the file backing_open created is still there after backing_close");
		break;
	case PATH_OLD:
		CHECK(stat(R.path, &st) == 0 && st.st_size == 0,
		      "an existing backing file after backing_close: %s, %lld bytes",
		      strerror(errno), (long long)st.st_size);
		CHECK(unlink(R.path) == 0, "unlink(%s) failed", R.path);
		break;
	default:
		CHECK(dir_entries(NULL) == 0, "an unnamed backing file left something in %s",
		      tmpdir);
		break;
	}
}

/* Next fit, as backing.h says: the first free run of n at or after the cursor, else
 * from the start; UINT64_MAX if none. */
NO_COVERAGE static uint64_t next_fit(uint64_t n)
{
	uint64_t run = 0;

	if (n > R.total - R.nused)
		return UINT64_MAX;
	for (uint64_t i = R.cursor; i < R.total; i++) {
		run = R.used[i] ? 0 : run + 1;
		if (run == n)
			return i + 1 - n;
	}
	/* Wrapped: a run that begins before the cursor (and may reach past it). */
	run = 0;
	for (uint64_t i = 0; i < R.total && i < R.cursor + n - 1; i++) {
		run = R.used[i] ? 0 : run + 1;
		if (run == n)
			return i + 1 - n;
	}
	return UINT64_MAX;
}

/* backing_alloc() of len, checked; returns the new object's number or -1. */
static int do_alloc(uint32_t len)
{
	const uint64_t n = slots_for(len);
	const uint64_t expect = len ? next_fit(n) : UINT64_MAX;
	uint64_t slot = UINT64_MAX;
	int ret;

	if (len && R.nobjs == BOP_MAX_OBJECTS)
		return -1;
	ret = backing_alloc(R.b, len, &slot);
	if (!len) {
		CHECK(ret == -EINVAL, "backing_alloc(0): %d", ret);
		return -1;
	}
	if (expect == UINT64_MAX) {
		CHECK(ret == -ENOSPC,
		      "backing_alloc(%u) with no free run of %llu slots: %d, slot "
		      "%llu",
		      len, ULL(n), ret, ULL(slot));
		counts.enospc++;
		return -1;
	}
	CHECK(ret == 0 && slot == expect,
	      "backing_alloc(%u), %llu slots, cursor %llu: %d, slot %llu; next fit is %llu", len,
	      ULL(n), ULL(R.cursor), ret, ULL(slot), ULL(expect));
	counts.wraps += expect < R.cursor;
	for (uint64_t i = slot; i < slot + n; i++) {
		counts.reused_slots += i * R.o.slot_size < R.eof;
		R.used[i] = 1;
	}
	R.nused += n;
	R.cursor = slot + n == R.total ? 0 : slot + n;
	R.objs[R.nobjs] = (struct obj){ slot, len, (uint32_t)n };
	counts.allocs++;
	return (int)R.nobjs++;
}

/* backing_free() of object i (with another length of as many slots when other). */
NO_COVERAGE static void do_free(unsigned i, int other, uint32_t a)
{
	const struct obj o = R.objs[i];
	uint32_t len = o.len;

	if (other)
		len = (o.nslots - 1) * R.o.slot_size + 1 + a % R.o.slot_size;
	backing_free(R.b, o.slot, len);
	for (uint64_t k = o.slot; k < o.slot + o.nslots; k++)
		R.used[k] = 0;
	R.nused -= o.nslots;
	R.objs[i] = R.objs[--R.nobjs];
	counts.frees++;
}

/* ---------------------------------------------------------------------------------- */
/* Batches                                                                            */
/* ---------------------------------------------------------------------------------- */

NO_COVERAGE static int valid(const struct backing_io *io)
{
	return (io->op == BACKING_READ || io->op == BACKING_WRITE) && io->buf && io->len > 0 &&
	       io->len <= INT32_MAX && io->slot < R.total &&
	       slots_for(io->len) <= R.total - io->slot;
}

/* A read or write of len bytes of object i, into a buffer of its own. */
static struct planned plan_io(unsigned i, int op, uint32_t len)
{
	struct planned p = { .obj = (int)i, .own_buf = 1 };

	p.io.slot = R.objs[i].slot;
	p.io.len = len;
	p.io.op = op;
	p.io.buf = xmalloc(len);
	if (op == BACKING_WRITE)
		fill(p.io.buf, len, ++R.seed);
	else
		memset(p.io.buf, 0xcc, len);
	return p;
}

/*
 * Runs a batch through backing_rw() and checks every io against the model: results,
 * bytes read, the file image, the counters. Frees the buffers.
 */
NO_COVERAGE static void run_batch(struct planned *p, unsigned n, const char *what)
{
	uint64_t eof_after = R.eof;
	unsigned live = 0, nreads = 0, failed = 0;
	int ret;

	/* In index order, as backing_rw() checks them and takes injected errors. */
	for (unsigned i = 0; i < n; i++) {
		struct backing_io *io = &p[i].io;
		const uint64_t off = io->slot * R.o.slot_size;

		R.budget += io->len <= INT32_MAX ? io->len : 0;
		if (!valid(io)) {
			p[i].expect = IO_ERR;
			p[i].err = -EINVAL;
			counts.invalid_ios++;
			continue;
		}
		if (R.inj[io->op].armed && R.inj[io->op].left-- == 0) {
			R.inj[io->op].armed = 0;
			p[i].expect = IO_ERR;
			p[i].err = R.inj[io->op].err;
			counts.injected++;
			continue;
		}
		live++;
		if (io->op == BACKING_READ) {
			nreads++;
		} else if (off + io->len > eof_after) {
			eof_after = off + io->len;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		const struct backing_io *io = &p[i].io;
		const uint64_t end = io->slot * R.o.slot_size + io->len;

		if (p[i].expect == IO_ERR || io->op == BACKING_WRITE)
			continue;
		/* Past the end of what was written: -EIO, unless a write of this batch ran first. */
		if (end <= R.eof) {
			p[i].expect = IO_OK;
		} else if (end > eof_after) {
			p[i].expect = IO_ERR;
			p[i].err = -EIO;
		} else {
			p[i].expect = IO_OK_OR_EIO;
			counts.racy_reads++;
		}
	}
	if (R.uring && live && (R.o.io_mode == BACKING_IO_URING || (live >= 2 && nreads)))
		R.E.uring_ios += live;

	{
		struct backing_io ios[BOP_MAX_BATCH * 2];

		for (unsigned i = 0; i < n; i++)
			ios[i] = p[i].io;
		ret = backing_rw(R.b, ios, n);
		for (unsigned i = 0; i < n; i++)
			p[i].io.result = ios[i].result;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct backing_io *io = &p[i].io;
		const int res = io->result, is_write = io->op == BACKING_WRITE;
		const uint64_t off = io->slot * R.o.slot_size;

		switch (p[i].expect) {
		case IO_ERR:
			CHECK(res == p[i].err,
			      "%s: io %u (op %d, slot %llu, %u bytes): %d, expected %d", what, i,
			      io->op, ULL(io->slot), io->len, res, p[i].err);
			break;
		case IO_OK_OR_EIO:
			CHECK(res == 0 || res == -EIO,
			      "%s: io %u (a read of %u bytes at %llu, in a batch that extends the "
			      "file "
			      "from %llu): %d",
			      what, i, io->len, ULL(off), ULL(R.eof), res);
			break;
		default:
			CHECK(res == 0, "%s: io %u (op %d, slot %llu, %u bytes, file end %llu): %d",
			      what, i, io->op, ULL(io->slot), io->len, ULL(R.eof), res);
			break;
		}
		failed += res != 0;
		if (res) {
			R.E.read_errors += !is_write;
			R.E.write_errors += is_write;
			counts.read_eio += !is_write && res == -EIO;
			continue;
		}
		if (is_write) {
			memcpy(R.img + off, io->buf, io->len);
			R.E.writes++;
			R.E.bytes_written += io->len;
			counts.writes++;
		} else {
			R.E.reads++;
			R.E.bytes_read += io->len;
			counts.reads++;
		}
	}
	/* The reads against the file after the batch: no write overlaps a read. */
	for (unsigned i = 0; i < n; i++) {
		const struct backing_io *io = &p[i].io;
		const uint64_t off = io->slot * R.o.slot_size;

		if (!io->result && io->op == BACKING_WRITE && off + io->len > R.eof)
			R.eof = off + io->len;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct backing_io *io = &p[i].io;
		const uint8_t *got = io->buf;
		const uint64_t off = io->slot * R.o.slot_size;

		if (io->result || io->op != BACKING_READ)
			continue;
		if (memcmp(got, R.img + off, io->len)) {
			for (uint32_t k = 0; k < io->len; k++)
				CHECK(got[k] == R.img[off + k],
				      "%s: io %u, a read of %u bytes at slot %llu (object %d): "
				      "byte %u "
				      "is %#04x, the file has %#04x",
				      what, i, io->len, ULL(io->slot), p[i].obj, k, got[k],
				      R.img[off + k]);
		}
		counts.bytes_compared += io->len;
	}
	CHECK(ret == (int)failed, "%s: backing_rw returned %d, %u ios failed", what, ret, failed);
	for (unsigned i = 0; i < n; i++) {
		if (p[i].own_buf)
			free(p[i].io.buf);
	}
	check_stats(what);
}

/* Up to k distinct objects from b with a stride (dup: the same one may come again). */
static unsigned pick(unsigned *out, unsigned k, uint32_t a, uint32_t b, int dup)
{
	const unsigned stride = 1 + a % 5;
	unsigned n = 0;

	if (!R.nobjs)
		return 0;
	for (unsigned j = 0; n < k && j < 4 * k; j++) {
		const unsigned i = (b + j * stride) % R.nobjs;
		int seen = 0;

		for (unsigned m = 0; m < n && !dup; m++)
			seen |= out[m] == i;
		if (!seen)
			out[n++] = i;
	}
	return n;
}

/* The length of an io on object i by mode (WRITE's param % 4). */
static uint32_t io_len(unsigned i, unsigned mode, uint32_t a)
{
	const uint32_t len = R.objs[i].len;

	switch (mode % 4) {
	case 1:
		return 1 + a % len;
	case 2:
		return 1;
	case 3:
		return len > a % 16 ? len - a % 16 : 1;
	default:
		return len;
	}
}

static int over_budget(void)
{
	if (R.budget <= BOP_BUDGET_BYTES)
		return 0;
	return 1;
}

static void op_rw(int op, unsigned param, unsigned sel, uint32_t a, uint32_t b)
{
	struct planned p[BOP_MAX_BATCH];
	unsigned idx[BOP_MAX_BATCH], n;

	if (over_budget())
		return;
	n = pick(idx, 1 + sel % BOP_MAX_BATCH, a, b, op == BACKING_READ);
	for (unsigned j = 0; j < n; j++) {
		const int o = op < 0 ? (j % 2 ? BACKING_READ : BACKING_WRITE) : op;

		p[j] = plan_io(idx[j], o, io_len(idx[j], param + j * (op < 0), a >> j));
	}
	if (n)
		run_batch(p, n,
			  op_names[op < 0		? BOP_MIXED
				   : op == BACKING_READ ? BOP_READ
							: BOP_WRITE]);
}

/* Reads every object back whole, a batch at a time. */
static void op_verify(const char *what)
{
	for (unsigned i = 0; i < R.nobjs; i += BOP_MAX_BATCH) {
		struct planned p[BOP_MAX_BATCH];
		unsigned n = 0;

		for (unsigned j = i; j < R.nobjs && n < BOP_MAX_BATCH; j++)
			p[n++] = plan_io(j, BACKING_READ, R.objs[j].len);
		run_batch(p, n, what);
	}
}

static uint32_t alloc_len(unsigned sel, uint32_t a)
{
	const uint32_t slot = R.o.slot_size;

	switch (sel % 8) {
	case BOP_LEN_SLOT:
		return 1 + a % slot;
	case BOP_LEN_SLOTS:
		return slot * (1 + a % 4) - 1 + (a >> 8) % 3;
	case BOP_LEN_8SLOTS:
		return 1 + a % (8 * slot);
	case BOP_LEN_64K:
		return 1 + a % (64 << 10);
	case BOP_LEN_2M:
		return 1 + a % ZF_UNIT_MAX;
	case BOP_LEN_ZERO:
		return 0;
	case BOP_LEN_HUGE:
		return UINT32_MAX - a;
	default: {
		const uint64_t free_bytes = (R.total - R.nused) * slot;

		return free_bytes > a % slot + 1 ? (uint32_t)(free_bytes - a % slot) : 1;
	}
	}
}

/* A batch of invalid ios of kind (enum bop_bad_kind) between valid ones. */
NO_COVERAGE static void op_bad(unsigned kind, uint32_t a, uint32_t b)
{
	struct planned p[BOP_MAX_BATCH * 2];
	unsigned idx[2], n = 0, nv = pick(idx, 2, a, b, 0);
	uint8_t small[8];

	if (nv)
		p[n++] = plan_io(idx[0], BACKING_READ, io_len(idx[0], a, b));
	for (unsigned k = 0; k < 7; k++) {
		struct planned *q = &p[n];

		if (kind != BOP_BAD_ALL && k != kind)
			continue;
		*q = (struct planned){ .obj = -1 };
		q->io = (struct backing_io){
			.slot = 0, .buf = small, .len = 1, .op = BACKING_READ
		};
		switch (k) {
		case BOP_BAD_OP:
			q->io.op = 2;
			break;
		case BOP_BAD_BUF:
			q->io.buf = NULL;
			q->io.op = a & 1;
			break;
		case BOP_BAD_LEN0:
			q->io.len = 0;
			break;
		case BOP_BAD_LEN_MAX:
			q->io.len = (uint32_t)INT32_MAX + 1 + a % 1000;
			q->io.op = BACKING_WRITE;
			break;
		case BOP_BAD_SLOT:
			q->io.slot = a & 1 ? UINT64_MAX - b % 4 : R.total + b % 8;
			break;
		case BOP_BAD_TAIL:
			q->io.slot = R.total - 1;
			q->io.len = (uint32_t)R.o.slot_size + 1;
			q->io.buf = xmalloc(q->io.len);
			q->own_buf = 1;
			q->io.op = BACKING_WRITE;
			break;
		default:
			q->io.op = -1;
			break;
		}
		n++;
	}
	if (nv > 1)
		p[n++] = plan_io(idx[1], BACKING_WRITE, io_len(idx[1], b, a));
	run_batch(p, n, "a batch with invalid ios");
}

/* backing_open() with options that must be refused. */
NO_COVERAGE static void bad_options(void)
{
	struct backing_options o;
	struct backing *b = (struct backing *)&o;
	const struct {
		int field;
		uint64_t value;
		int expect;
	} cases[] = {
		{ 0, 256, -EINVAL },
		{ 0, 3000, -EINVAL },
		{ 0, 2 * ZF_UNIT_MAX, -EINVAL },
		{ 1, 0, -EINVAL },
		{ 1, 4097, -EINVAL },
		{ 2, 3, -EINVAL },
		{ 2, (uint64_t)-1, -EINVAL },
		{ 3, 4095, -EINVAL },
		{ 3, (uint64_t)INT64_MAX + 1, -EINVAL },
		{ 4, 0, -EINVAL },
		{ 5, 0, -EINVAL },
		{ 6, 0, -ENOENT },
		{ 7, 0, -EINVAL },
	};

	CHECK(backing_open(NULL, &b) == -EINVAL, "backing_open(NULL options)");
	CHECK(backing_open(&R.o, NULL) == -EINVAL, "backing_open(NULL out)");
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int ret;

		backing_options_init(&o);
		o.path = get_tmpdir();
		switch (cases[i].field) {
		case 0:
			o.slot_size = (uint32_t)cases[i].value;
			break;
		case 1:
			o.queue_depth = (unsigned)cases[i].value;
			break;
		case 2:
			o.io_mode = (int)cases[i].value;
			break;
		case 3:
			o.max_bytes = cases[i].value;
			break;
		case 4:
			o.path = NULL;
			break;
		case 5:
			o.path = "";
			break;
		case 6:
			o.path = "/nonexistent-zfolio-fuzz/backing";
			break;
		default:
			o.path = "/dev/null"; /* neither a directory nor a regular file */
			break;
		}
		b = (struct backing *)&o;
		ret = backing_open(&o, &b);
		CHECK(ret == cases[i].expect && !b,
		      "backing_open with bad option %u: %d, expected %d", i, ret, cases[i].expect);
		counts.invalid_ios++;
	}
}

static void op_inject(unsigned param, unsigned sel, uint32_t b)
{
	static const int errs[4] = { -EIO, -ENOSPC, -EINTR, 0 };
	const int op = param & 1 ? BACKING_WRITE : BACKING_READ;
	const int err = errs[sel & 3];

	backing_inject_error(R.b, op, b % 8, err);
	R.inj[op].armed = err != 0;
	R.inj[op].left = b % 8;
	R.inj[op].err = err;
}

static void op_stats(uint32_t a)
{
	const uint32_t lens[] = { 1, R.o.slot_size, R.o.slot_size + 1, a, UINT32_MAX };

	CHECK(backing_slot_size(R.b) == R.o.slot_size, "backing_slot_size: %u",
	      backing_slot_size(R.b));
	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		CHECK(backing_slots_for(R.b, lens[i]) == slots_for(lens[i]),
		      "backing_slots_for(%u): %llu", lens[i], ULL(backing_slots_for(R.b, lens[i])));
	check_stats("stats");
}

/* A second backing_open() of the same path while the first is open. */
static void op_second(uint32_t a, uint32_t b)
{
	struct backing *b2 = (struct backing *)&b2;
	const int ret = backing_open(&R.o, &b2);

	if (R.path_kind == PATH_DIR) {
		CHECK(ret == 0 && b2, "a second backing in %s: %d", R.path, ret);
		backing_close(b2);
		CHECK(dir_entries(NULL) == 0, "a second unnamed backing file left something");
		return;
	}
	CHECK(ret == -EBUSY && !b2, "a second backing_open of %s in use: %d", R.path, ret);
	counts.ebusy++;
	{
		/* The failed open neither emptied nor removed the first one's file. */
		struct stat st;

		CHECK(stat(R.path, &st) == 0 && (uint64_t)st.st_size == R.eof,
		      "after a refused second open, %s has %lld bytes, %llu written", R.path,
		      (long long)st.st_size, ULL(R.eof));
	}
	if (!over_budget())
		op_rw(BACKING_READ, 0, 3, a, b);
}

/* ---------------------------------------------------------------------------------- */
/* A run                                                                              */
/* ---------------------------------------------------------------------------------- */

static void run_op(const uint8_t *rec)
{
	const enum bop_code op = bop_of_code(rec[0]);
	const unsigned param = rec[0] >> 4, sel = rec[1];
	const uint32_t a = bop_get24(rec + 2), b = bop_get24(rec + 5);

	R.op_name = op_names[op];
	counts.ops[op]++;
	switch (op) {
	case BOP_ALLOC:
		do_alloc(alloc_len(sel, a));
		break;
	case BOP_BURST: {
		const uint32_t len = alloc_len(sel, a);

		for (unsigned i = 0; i < 1 + b % 32; i++) {
			if (do_alloc(len) < 0)
				break;
		}
		break;
	}
	case BOP_FREE:
		if (R.nobjs)
			do_free(b % R.nobjs, param & 1, a);
		break;
	case BOP_FREE_STRIDE: {
		const unsigned stride = 2 + sel % 4, first = a % stride;

		for (unsigned i = R.nobjs; i-- > 0;) {
			if (i % stride == first)
				do_free(i, 0, a);
		}
		break;
	}
	case BOP_WRITE:
		op_rw(BACKING_WRITE, param, sel, a, b);
		break;
	case BOP_READ:
		op_rw(BACKING_READ, param, sel, a, b);
		break;
	case BOP_MIXED:
		op_rw(-1, param, sel, a, b);
		break;
	case BOP_BAD:
		op_bad(param % 8, a, b);
		if (param & 8)
			bad_options();
		break;
	case BOP_INJECT:
		op_inject(param, sel, b);
		break;
	case BOP_STATS:
		op_stats(a);
		break;
	case BOP_VERIFY:
		if (!over_budget())
			op_verify("verify");
		break;
	case BOP_REOPEN:
		close_backing();
		open_backing();
		counts.reopens++;
		break;
	case BOP_SECOND:
		op_second(a, b);
		break;
	}
	check_stats("after the op");
}

static void setup(const uint8_t *h)
{
	static const char *const names[4] = { "", "/new", "/old", "" };
	const unsigned shift = (h[0] & 15) % 13;
	uint64_t slots = bop_slots[h[1] & 15];

	backing_options_init(&R.o);
	R.o.slot_size = BACKING_MIN_SLOT_SIZE << shift;
	if (slots * R.o.slot_size > BOP_MAX_FILE)
		slots = BOP_MAX_FILE / R.o.slot_size;
	R.total = slots;
	R.o.max_bytes = slots * R.o.slot_size + (h[1] >> 7 ? R.o.slot_size - 1 : 0);
	R.o.queue_depth = bop_depths[(h[1] >> 4) & 7];
	R.o.io_mode = (h[0] >> 4) & 3;
	if (R.o.io_mode == 3)
		R.o.io_mode = BACKING_IO_AUTO;
	R.path_kind = h[0] >> 6 == 3 ? PATH_DIR : h[0] >> 6;
	snprintf(R.path, sizeof(R.path), "%s%s", get_tmpdir(), names[R.path_kind]);
	R.o.path = R.path;
	R.used = xmalloc(R.total);
	R.img = xmalloc(R.total * R.o.slot_size);
	open_backing();
}

int backing_ops_run(const uint8_t *data, size_t size)
{
	uint8_t h[BOP_HEADER] = { 0 };

	memset(&R, 0, sizeof(R));
	R.data = data;
	R.size = size;
	counts.runs++;
	memcpy(h, data, size < BOP_HEADER ? size : BOP_HEADER);
	setup(h);

	for (size_t off = BOP_HEADER; off < size && R.op_no < BOP_MAX_OPS; off += BOP_RECORD) {
		const size_t n = size - off < BOP_RECORD ? size - off : BOP_RECORD;

		memset(R.rec, 0, sizeof(R.rec));
		memcpy(R.rec, data + off, n);
		R.offset = off;
		run_op(R.rec);
		R.op_no++;
	}

	/* The end: every object reads back, every slot comes back. */
	R.op_name = "final verify";
	R.budget = 0;
	memset(R.inj, 0, sizeof(R.inj));
	backing_inject_error(R.b, BACKING_READ, 0, 0);
	backing_inject_error(R.b, BACKING_WRITE, 0, 0);
	op_verify("the final verify");
	R.op_name = "final frees";
	while (R.nobjs)
		do_free(R.nobjs - 1, 0, 0);
	check_stats("every object freed");
	if (R.total) {
		const int i = do_alloc((uint32_t)(R.total * R.o.slot_size));

		CHECK(i == 0, "an empty file of %llu slots cannot take one object of them all",
		      ULL(R.total));
		do_free(0, 0, 0);
	}
	close_backing();
	free(R.used);
	free(R.img);
	R.b = NULL;
	R.data = NULL;
	return 0;
}
