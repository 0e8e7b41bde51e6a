/*
 * backing.c - the backing tier: slots in a file for written-back objects, and the I/O
 * that moves objects in and out of them (zswap writeback, zram's backing_dev).
 *
 * Slots. The file is max_bytes cut into slot_size slots; an object of len bytes takes
 * ceil(len / slot_size) contiguous slots, so it is one read and one write at one offset.
 * A bitmap (1 = used) under a mutex tracks them; allocation is next fit: the search
 * starts where the previous allocation ended and wraps once, skipping whole words of
 * used or free slots at a time (O(words)), and takes the first free run long enough.
 * Next fit keeps consecutive writebacks close together in the file (the disk sees
 * nearly sequential writes) and spreads reuse, at the price of some fragmentation that
 * a best-fit search would avoid; runs are short (at most 513 slots of 4 KiB for a 2 MiB
 * object) next to the file, so it rarely matters. The file is sparse and slots are not
 * punched on free: a full filesystem shows up as -ENOSPC from a write, not at open.
 *
 * I/O. backing_rw() takes a batch and waits for all of it. There is one io_uring per
 * backing, shared by all threads under ring_lock, which the caller holds for its whole
 * batch: it queues one SQE per io, submits them with one io_uring_enter(), and reaps
 * its own CQEs (nobody else can have submitted), refilling the ring when the batch is
 * longer than the queue. A ring per thread would avoid the lock but costs a ring (and
 * its locked memory) per fault thread and per writeback thread, for batches that are
 * rarely concurrent.
 *
 * Which batches use the ring (AUTO; URING sends them all) was measured, not assumed:
 * the file is buffered (no O_DIRECT: objects are unaligned and of any length), so a
 * write is a copy into the page cache under the inode lock, and a read that hits the
 * page cache is a copy too. The ring adds a hand-off to a kernel worker whenever the
 * filesystem cannot do the copy without blocking (tmpfs reads, buffered writes), and
 * gains only when several reads go to the device at once. Medians on the project's
 * 2-core VM (ext4 on virtio, and tmpfs), three runs each:
 *
 *                                      pread/pwrite       io_uring
 *   one 4 KiB read, page cache         2.0-2.1 us         2.4-2.5 us (tmpfs 5-27 us)
 *   one 4 KiB read, cold (ext4)        70-73 us           71-73 us
 *   32 x 64 KiB writes (ext4)          131-137 us         207-220 us
 *   32 x 64 KiB writes (tmpfs)         179-232 us         253-335 us
 *   32 random 4 KiB reads, cold        2.35-2.39 ms       0.23-0.26 ms
 *   32 x 64 KiB in a row, cold         1.2 ms             1.7 ms (readahead helps pread)
 *
 * So AUTO sends a batch through the ring when it has two ios or more and a read among
 * them (readahead and multi-unit swap-in are scattered reads), and does everything else
 * with pread/pwrite.
 *
 * A fault's read never waits behind writeback: in AUTO it does not use the ring; in
 * URING mode, a batch of reads that finds the ring held by a batch with writes
 * (ring_writing) does pread() from its own thread instead of waiting. A 4 KiB read
 * during back-to-back 32 x 64 KiB writebacks took 3.0-3.5 us that way; queued for the
 * ring it took 230-450 us (median) and 0.7-5.5 ms (p99). A batch of reads waits for
 * another batch of reads: that is short, and pread() one by one would not beat it.
 *
 * Short reads and writes are resubmitted for the rest, from where they stopped; -EAGAIN
 * and -EINTR are retried, at most MAX_RETRIES times per io; a read or write that makes
 * no progress (0 bytes: a read past what was written) fails with -EIO. The synchronous
 * path does the same with pread/pwrite in a loop.
 *
 * Errors are only reported: nothing here frees slots or drops data (see backing.h).
 */
#include <assert.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef ZF_WITH_URING
#include <liburing.h>
/*
 * memcheck cannot see the kernel write into a buffer outside a syscall (an io_uring
 * read completes in a worker), so it would call every byte read that way undefined.
 * The client request tells it; outside valgrind it costs a few instructions.
 */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define MARK_DEFINED(p, n) VALGRIND_MAKE_MEM_DEFINED(p, n)
#endif
#endif
#ifndef MARK_DEFINED
#define MARK_DEFINED(p, n) ((void)(p), (void)(n))
#endif
#endif

#include "backing.h"

/* -EAGAIN/-EINTR retries of one io before its error is reported. */
#define MAX_RETRIES 64u

#define WORD_BITS 64u

struct backing {
	int fd;
	char *unlink_path; /* the file we created, to unlink at close; NULL otherwise */
	int truncate_at_close; /* an existing file we reused */
	uint32_t slot_size;
	unsigned slot_shift;
	uint64_t slots_total;

	/* The slot bitmap, 1 = used. */
	pthread_mutex_t slot_lock;
	uint64_t *map; /* ceil(slots_total / 64) words */
	uint64_t cursor; /* where the next search starts */

#ifdef ZF_WITH_URING
	/* The ring, and the lock held by the thread whose batch is in it. */
	pthread_mutex_t ring_lock;
	atomic_int ring_writing; /* the batch holding the ring has writes */
	struct io_uring ring;
	unsigned ring_depth; /* at most this many ios in flight */
#endif
	int uring; /* the ring is set up and in use */
	int io_mode;

	/* Counters. */
	atomic_uint_fast64_t slots_used;
	atomic_uint_fast64_t ios[2], bytes[2], errors[2];
	atomic_uint_fast64_t read_busy_sync, uring_ios;

#ifdef ZF_TEST_HOOKS
	/* Error injection: countdown to the failing io of each op (0 = off), and its error. */
	atomic_int_fast64_t inject_countdown[2];
	atomic_int inject_err[2];
#endif
};

/* -------------------------------------------------------------------------------- */
/* Options and opening                                                              */
/* -------------------------------------------------------------------------------- */

void backing_options_init(struct backing_options *o)
{
	memset(o, 0, sizeof(*o));
	o->max_bytes = BACKING_DEFAULT_MAX_BYTES;
	o->slot_size = BACKING_DEFAULT_SLOT_SIZE;
	o->queue_depth = BACKING_DEFAULT_QUEUE_DEPTH;
	o->io_mode = BACKING_IO_AUTO;
}

static int check_options(const struct backing_options *o)
{
	RETURN_IF(!o->path || !o->path[0], -EINVAL);
	RETURN_IF(o->slot_size < BACKING_MIN_SLOT_SIZE || o->slot_size > BACKING_MAX_SLOT_SIZE,
		  -EINVAL);
	RETURN_IF(o->slot_size & (o->slot_size - 1), -EINVAL);
	RETURN_IF(o->queue_depth < 1 || o->queue_depth > BACKING_MAX_QUEUE_DEPTH, -EINVAL);
	RETURN_IF(o->io_mode != BACKING_IO_AUTO && o->io_mode != BACKING_IO_URING &&
			  o->io_mode != BACKING_IO_SYNC,
		  -EINVAL);
	RETURN_IF(o->max_bytes < o->slot_size || o->max_bytes > (uint64_t)INT64_MAX, -EINVAL);
	return 0;
}

/* An unnamed file in directory dir: O_TMPFILE, or mkstemp() + unlink() where unsupported. */
static int open_tmpfile(const char *dir)
{
	const size_t len = strlen(dir) + sizeof("/zfolio-backing-XXXXXX");
	char *name;
	int fd;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
	name = malloc(len);
	RETURN_IF(!name, -ENOMEM);
	snprintf(name, len, "%s/zfolio-backing-XXXXXX", dir);
	fd = mkostemp(name, O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
	} else if (unlink(name) < 0) {
		const int err = -errno;

		close(fd);
		fd = err;
	}
	free(name);
	return fd;
}

/*
 * A named file: created (and then ours to unlink) or, if it exists, a regular file we
 * truncate. flock() keeps two backings off one file.
 */
static int open_named(struct backing *b, const char *path)
{
	struct stat st;
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		b->unlink_path = strdup(path);
		if (!b->unlink_path) {
			unlink(path);
			close(fd);
			return -ENOMEM;
		}
	} else if (errno == EEXIST) {
		fd = open(path, O_RDWR | O_CLOEXEC);
		RETURN_IF(fd < 0, -errno);
	} else {
		return -errno;
	}
	b->fd = fd;
	RETURN_IF(fstat(fd, &st) < 0, -errno);
	RETURN_IF(!S_ISREG(st.st_mode), -EINVAL);
	RETURN_IF(flock(fd, LOCK_EX | LOCK_NB) < 0, errno == EWOULDBLOCK ? -EBUSY : -errno);
	if (!b->unlink_path) {
		/* Ours now: empty it, and again at close. */
		RETURN_IF(ftruncate(fd, 0) < 0, -errno);
		b->truncate_at_close = 1;
	}
	return 0;
}

static int open_file(struct backing *b, const char *path)
{
	struct stat st;
	int fd;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		fd = open_tmpfile(path);
		TRY(fd);
		b->fd = fd;
		return 0;
	}
	return open_named(b, path);
}

#ifdef ZF_WITH_URING
/* Sets up the ring. Returns 0 or -errno (-ENOSYS when the kernel lacks read/write ops). */
static int ring_init(struct backing *b, unsigned depth)
{
	struct io_uring_params p;
	struct io_uring_probe *probe;
	int ret, ok;

	/* COOP_TASKRUN (5.19): no IPI to run completions; we reap from the submitting thread. */
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_COOP_TASKRUN;
	ret = io_uring_queue_init_params(depth, &b->ring, &p);
	if (ret == -EINVAL) {
		memset(&p, 0, sizeof(p));
		ret = io_uring_queue_init_params(depth, &b->ring, &p);
	}
	TRY(ret);
	probe = io_uring_get_probe_ring(&b->ring);
	ok = probe && io_uring_opcode_supported(probe, IORING_OP_READ) &&
	     io_uring_opcode_supported(probe, IORING_OP_WRITE);
	io_uring_free_probe(probe);
	if (!ok) {
		io_uring_queue_exit(&b->ring);
		return -ENOSYS;
	}
	b->ring_depth = ZF_MIN(depth, b->ring.sq.ring_entries);
	return 0;
}
#endif

static int setup_io(struct backing *b, const struct backing_options *o)
{
#ifdef ZF_WITH_URING
	int ret;

	if (o->io_mode == BACKING_IO_SYNC)
		return 0;
	ret = ring_init(b, o->queue_depth);
	if (ret == 0) {
		b->uring = 1;
		return 0;
	}
	if (o->io_mode == BACKING_IO_URING)
		return ret;
	common_log(ZF_LOG_INFO, "backing: io_uring unavailable (%s), using pread/pwrite",
		   zf_strerror(ret));
	return 0;
#else
	(void)b;
	return o->io_mode == BACKING_IO_URING ? -ENOSYS : 0;
#endif
}

int backing_open(const struct backing_options *o, struct backing **out)
{
	struct backing *b;
	int ret;

	RETURN_IF(!o || !out, -EINVAL);
	*out = NULL;
	TRY(check_options(o));
	b = calloc(1, sizeof(*b));
	RETURN_IF(!b, -ENOMEM);
	b->fd = -1;
	b->slot_size = o->slot_size;
	b->io_mode = o->io_mode;
	b->slot_shift = (unsigned)__builtin_ctz(o->slot_size);
	b->slots_total = o->max_bytes >> b->slot_shift;
	pthread_mutex_init(&b->slot_lock, NULL);
#ifdef ZF_WITH_URING
	pthread_mutex_init(&b->ring_lock, NULL);
#endif
	b->map = calloc((b->slots_total + WORD_BITS - 1) / WORD_BITS, sizeof(uint64_t));
	ret = b->map ? open_file(b, o->path) : -ENOMEM;
	if (ret == 0)
		ret = setup_io(b, o);
	if (ret < 0) {
		backing_close(b);
		return ret;
	}
	*out = b;
	return 0;
}

void backing_close(struct backing *b)
{
	if (!b)
		return;
#ifdef ZF_WITH_URING
	if (b->uring)
		io_uring_queue_exit(&b->ring);
	pthread_mutex_destroy(&b->ring_lock);
#endif
	if (b->unlink_path)
		unlink(b->unlink_path);
	if (b->fd >= 0) {
		/* Give the disk space back; a failure leaves a file we were told to use. */
		if (b->truncate_at_close && ftruncate(b->fd, 0) < 0)
			common_log(ZF_LOG_WARN, "backing: truncating the file at close: %s",
				   zf_strerror(-errno));
		close(b->fd);
	}
	pthread_mutex_destroy(&b->slot_lock);
	free(b->unlink_path);
	free(b->map);
	free(b);
}

uint32_t backing_slot_size(const struct backing *b)
{
	return b->slot_size;
}

uint64_t backing_slots_for(const struct backing *b, uint32_t len)
{
	return ((uint64_t)len + b->slot_size - 1) >> b->slot_shift;
}

/* -------------------------------------------------------------------------------- */
/* Slots                                                                            */
/* -------------------------------------------------------------------------------- */

/*
 * The first bit at or after pos and below end that is set (invert 0) or clear
 * (invert ~0); end if there is none.
 */
static uint64_t find_bit(const uint64_t *map, uint64_t pos, uint64_t end, uint64_t invert)
{
	while (pos < end) {
		const uint64_t w = (map[pos / WORD_BITS] ^ invert) >> (pos % WORD_BITS);

		if (w)
			return ZF_MIN(pos + (uint64_t)__builtin_ctzll(w), end);
		pos = (pos | (WORD_BITS - 1)) + 1;
	}
	return end;
}

/* Sets (value 1) or clears n bits from start; returns how many changed. */
static uint64_t set_bits(uint64_t *map, uint64_t start, uint64_t n, int value)
{
	uint64_t changed = 0;

	while (n) {
		const unsigned shift = (unsigned)(start % WORD_BITS);
		const uint64_t k = ZF_MIN(n, (uint64_t)(WORD_BITS - shift));
		const uint64_t mask = (k == WORD_BITS ? ~0ull : ((1ull << k) - 1)) << shift;
		uint64_t *w = &map[start / WORD_BITS];

		changed += (uint64_t)__builtin_popcountll(value ? mask & ~*w : mask & *w);
		*w = value ? *w | mask : *w & ~mask;
		start += k;
		n -= k;
	}
	return changed;
}

/* The first run of n clear bits inside [lo, hi); UINT64_MAX if none. */
static uint64_t find_run(const uint64_t *map, uint64_t lo, uint64_t hi, uint64_t n)
{
	uint64_t pos = lo;

	while (pos + n <= hi) {
		const uint64_t start = find_bit(map, pos, hi, ~0ull);
		uint64_t end;

		if (start + n > hi)
			break;
		end = find_bit(map, start, start + n, 0);
		if (end == start + n)
			return start;
		pos = find_bit(map, end, hi, ~0ull);
	}
	return UINT64_MAX;
}

#ifdef ZF_DEBUG_FULL
/* The bitmap agrees with slots_used. Caller holds slot_lock. */
static void check_slots(const struct backing *b)
{
	uint64_t used = 0;

	for (uint64_t i = 0; i < (b->slots_total + WORD_BITS - 1) / WORD_BITS; i++)
		used += (uint64_t)__builtin_popcountll(b->map[i]);
	assert(used == atomic_load(&b->slots_used));
	(void)used;
	assert(b->slots_total % WORD_BITS == 0 ||
	       b->map[b->slots_total / WORD_BITS] >> (b->slots_total % WORD_BITS) == 0);
}
#else
static void check_slots(const struct backing *b)
{
	(void)b;
}
#endif

int backing_alloc(struct backing *b, uint32_t len, uint64_t *slot)
{
	const uint64_t n = backing_slots_for(b, len);
	uint64_t s = UINT64_MAX;

	RETURN_IF(len == 0, -EINVAL);
	pthread_mutex_lock(&b->slot_lock);
	if (n <= b->slots_total - atomic_load_explicit(&b->slots_used, memory_order_relaxed)) {
		s = find_run(b->map, b->cursor, b->slots_total, n);
		/* Wrap: a run may start before the cursor and reach past it. */
		if (s == UINT64_MAX)
			s = find_run(b->map, 0, ZF_MIN(b->slots_total, b->cursor + n - 1), n);
	}
	if (s != UINT64_MAX) {
		set_bits(b->map, s, n, 1);
		atomic_fetch_add_explicit(&b->slots_used, n, memory_order_relaxed);
		b->cursor = s + n == b->slots_total ? 0 : s + n;
		check_slots(b);
	}
	pthread_mutex_unlock(&b->slot_lock);
	RETURN_IF(s == UINT64_MAX, -ENOSPC);
	*slot = s;
	return 0;
}

void backing_free(struct backing *b, uint64_t slot, uint32_t len)
{
	const uint64_t n = backing_slots_for(b, len);
	uint64_t freed;

	if (unlikely(len == 0 || slot >= b->slots_total || n > b->slots_total - slot)) {
		common_log(ZF_LOG_ERROR, "backing: free of slots %llu+%llu outside the file",
			   (unsigned long long)slot, (unsigned long long)n);
		assert(!"backing_free outside the file");
		return;
	}
	pthread_mutex_lock(&b->slot_lock);
	freed = set_bits(b->map, slot, n, 0);
	atomic_fetch_sub_explicit(&b->slots_used, freed, memory_order_relaxed);
	check_slots(b);
	pthread_mutex_unlock(&b->slot_lock);
	if (unlikely(freed != n)) {
		common_log(ZF_LOG_ERROR, "backing: free of slots %llu+%llu: %llu were not in use",
			   (unsigned long long)slot, (unsigned long long)n,
			   (unsigned long long)(n - freed));
		assert(!"backing_free of free slots");
	}
}

/* -------------------------------------------------------------------------------- */
/* I/O                                                                              */
/* -------------------------------------------------------------------------------- */

/*
 * While a batch runs, io->result holds the bytes done so far (>= 0) or the final error
 * (< 0); the batch ends with 0 for every io that completed.
 */

static int io_valid(const struct backing *b, const struct backing_io *io)
{
	return (io->op == BACKING_READ || io->op == BACKING_WRITE) && io->buf && io->len > 0 &&
	       io->len <= INT32_MAX && io->slot < b->slots_total &&
	       backing_slots_for(b, io->len) <= b->slots_total - io->slot;
}

#ifdef ZF_TEST_HOOKS
/* The error to inject into the next io of op, or 0. */
static int injected(struct backing *b, int op)
{
	int_fast64_t v = atomic_load_explicit(&b->inject_countdown[op], memory_order_acquire);

	while (v > 0) {
		if (atomic_compare_exchange_weak(&b->inject_countdown[op], &v, v - 1))
			return v == 1 ? atomic_load(&b->inject_err[op]) : 0;
	}
	return 0;
}

void backing_inject_error(struct backing *b, int op, uint64_t after_n, int err)
{
	if (op != BACKING_READ && op != BACKING_WRITE)
		return;
	assert(err <= 0);
	atomic_store(&b->inject_err[op], err < 0 ? err : -err);
	atomic_store_explicit(&b->inject_countdown[op],
			      err ? (int_fast64_t)ZF_MIN(after_n, (uint64_t)INT64_MAX - 1) + 1 : 0,
			      memory_order_release);
}
#else
static int injected(const struct backing *b, int op)
{
	(void)b;
	(void)op;
	return 0;
}
#endif

static off_t io_offset(const struct backing *b, const struct backing_io *io)
{
	return (off_t)(io->slot << b->slot_shift) + io->result;
}

/* Does one io with pread/pwrite; returns 0 or -errno. */
static int sync_one(struct backing *b, struct backing_io *io)
{
	unsigned retries = 0;

	while ((uint32_t)io->result < io->len) {
		uint8_t *const buf = (uint8_t *)io->buf + io->result;
		const size_t left = io->len - (uint32_t)io->result;
		const ssize_t r = io->op == BACKING_READ
					  ? pread(b->fd, buf, left, io_offset(b, io))
					  : pwrite(b->fd, buf, left, io_offset(b, io));

		if (r < 0) {
			if ((errno == EINTR || errno == EAGAIN) && retries++ < MAX_RETRIES)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		io->result += (int)r;
	}
	return 0;
}

static void sync_batch(struct backing *b, struct backing_io *ios, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (ios[i].result >= 0)
			ios[i].result = sync_one(b, &ios[i]);
	}
}

#ifdef ZF_WITH_URING
/* Queues (the rest of) ios[idx]; there is room, as at most ring_depth ios are in flight. */
static void uring_queue(struct backing *b, struct backing_io *ios, unsigned idx, unsigned retries)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);
	struct backing_io *io = &ios[idx];
	uint8_t *const buf = (uint8_t *)io->buf + io->result;
	const unsigned left = io->len - (uint32_t)io->result;

	assert(sqe);
	if (io->op == BACKING_READ)
		io_uring_prep_read(sqe, b->fd, buf, left, (uint64_t)io_offset(b, io));
	else
		io_uring_prep_write(sqe, b->fd, buf, left, (uint64_t)io_offset(b, io));
	io_uring_sqe_set_data64(sqe, (uint64_t)retries << 32 | idx);
}

/*
 * Runs the batch through the ring. Caller holds ring_lock, so every CQE is one of ours.
 * inflight counts the ios queued and not yet reaped; it never exceeds the ring, so
 * uring_queue() always finds an SQE, and the CQ ring (twice the SQ) never overflows.
 */
static void uring_batch(struct backing *b, struct backing_io *ios, unsigned n)
{
	unsigned next = 0, inflight = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		int ret;

		for (; next < n && inflight < b->ring_depth; next++) {
			if (ios[next].result < 0)
				continue;
			uring_queue(b, ios, next, 0);
			inflight++;
		}
		if (!inflight)
			break;
		ret = io_uring_submit_and_wait(&b->ring, 1);
		if (ret == -EAGAIN || ret == -EBUSY) {
			/* Kernel short of memory, or completions to reap first: reap, retry. */
			sched_yield();
		} else if (ret < 0 && ret != -EINTR) {
			/*
			 * Cannot happen with a valid ring. The kernel may still be writing
			 * into the callers' buffers, so returning would be unsafe.
			 */
			common_log(ZF_LOG_ERROR, "backing: io_uring_enter failed: %s",
				   zf_strerror(ret));
			abort();
		}
		while (io_uring_peek_cqe(&b->ring, &cqe) == 0) {
			const uint64_t data = io_uring_cqe_get_data64(cqe);
			const unsigned idx = (unsigned)data;
			unsigned retries = (unsigned)(data >> 32);
			struct backing_io *io = &ios[idx];
			const int res = cqe->res;

			io_uring_cqe_seen(&b->ring, cqe);
			inflight--;
			if ((res == -EAGAIN || res == -EINTR) && retries < MAX_RETRIES) {
				retries++;
			} else if (res < 0) {
				io->result = res;
				continue;
			} else if (res == 0) {
				io->result = -EIO; /* no progress: a read past the end */
				continue;
			} else {
				if (io->op == BACKING_READ)
					MARK_DEFINED((uint8_t *)io->buf + io->result, (size_t)res);
				io->result += res;
				if ((uint32_t)io->result == io->len) {
					io->result = 0;
					continue;
				}
			}
			/* Retry, or a short read/write: queue the rest. */
			uring_queue(b, ios, idx, retries);
			inflight++;
		}
	}
}
#endif

#ifdef ZF_WITH_URING
/*
 * Whether a batch of live ios (nreads of them reads) goes through the ring. In AUTO
 * mode only batches of two or more ios with a read in them do: those are the ones the
 * ring makes faster (reads that miss the page cache go to the device together, not one
 * after the other). A single io is one syscall either way, and the ring adds a hand-off
 * to a kernel worker where the filesystem cannot do it without blocking (tmpfs: 10x
 * slower); buffered writes to one file are serialized by its inode lock whatever
 * submits them, so the ring only adds that hand-off. URING mode sends every batch.
 */
static int use_ring(const struct backing *b, unsigned live, unsigned nreads)
{
	if (!b->uring)
		return 0;
	return b->io_mode == BACKING_IO_URING || (live >= 2 && nreads > 0);
}

/*
 * Takes the ring, or returns 0 when a batch of reads finds it held by a batch with
 * writes: a fault's read does not queue behind another thread's writeback (it does
 * pread() instead); it does wait for another batch of reads, which is short and which
 * it would not beat with pread() one by one. A writer may take the ring between the
 * check and the wait; that makes the reader wait once, it is not an error.
 */
static int ring_get(struct backing *b, int has_write)
{
	if (pthread_mutex_trylock(&b->ring_lock) != 0) {
		if (!has_write && atomic_load_explicit(&b->ring_writing, memory_order_relaxed))
			return 0;
		pthread_mutex_lock(&b->ring_lock);
	}
	atomic_store_explicit(&b->ring_writing, has_write, memory_order_relaxed);
	return 1;
}

static void ring_put(struct backing *b)
{
	atomic_store_explicit(&b->ring_writing, 0, memory_order_relaxed);
	pthread_mutex_unlock(&b->ring_lock);
}
#endif

/* Dispatches the live ios (result 0) of the batch. */
static void run_batch(struct backing *b, struct backing_io *ios, unsigned n, unsigned live,
		      unsigned nreads)
{
#ifdef ZF_WITH_URING
	if (use_ring(b, live, nreads)) {
		if (ring_get(b, nreads < live)) {
			uring_batch(b, ios, n);
			ring_put(b);
			atomic_fetch_add_explicit(&b->uring_ios, live, memory_order_relaxed);
			return;
		}
		atomic_fetch_add_explicit(&b->read_busy_sync, 1, memory_order_relaxed);
	}
#else
	(void)live;
	(void)nreads;
#endif
	sync_batch(b, ios, n);
}

int backing_rw(struct backing *b, struct backing_io *ios, unsigned n)
{
	uint64_t ok[2] = { 0, 0 }, bytes[2] = { 0, 0 }, errors[2] = { 0, 0 };
	unsigned live = 0, nreads = 0;
	int failed = 0;

	for (unsigned i = 0; i < n; i++) {
		struct backing_io *io = &ios[i];

		if (!io_valid(b, io)) {
			io->result = -EINVAL;
		} else {
			io->result = injected(b, io->op);
			live += io->result == 0;
			nreads += io->result == 0 && io->op == BACKING_READ;
		}
	}
	if (live)
		run_batch(b, ios, n, live, nreads);
	for (unsigned i = 0; i < n; i++) {
		const int op = ios[i].op == BACKING_WRITE ? BACKING_WRITE : BACKING_READ;

		assert(ios[i].result <= 0);
		if (ios[i].result == 0) {
			ok[op]++;
			bytes[op] += ios[i].len;
		} else {
			errors[op]++;
			failed++;
		}
	}
	for (int op = 0; op < 2; op++) {
		if (ok[op]) {
			atomic_fetch_add_explicit(&b->ios[op], ok[op], memory_order_relaxed);
			atomic_fetch_add_explicit(&b->bytes[op], bytes[op], memory_order_relaxed);
		}
		if (errors[op])
			atomic_fetch_add_explicit(&b->errors[op], errors[op], memory_order_relaxed);
	}
	return failed;
}

void backing_get_stats(const struct backing *b, struct backing_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->slots_total = b->slots_total;
	st->slots_used = atomic_load_explicit(&b->slots_used, memory_order_relaxed);
	st->reads = atomic_load_explicit(&b->ios[BACKING_READ], memory_order_relaxed);
	st->writes = atomic_load_explicit(&b->ios[BACKING_WRITE], memory_order_relaxed);
	st->bytes_read = atomic_load_explicit(&b->bytes[BACKING_READ], memory_order_relaxed);
	st->bytes_written = atomic_load_explicit(&b->bytes[BACKING_WRITE], memory_order_relaxed);
	st->read_errors = atomic_load_explicit(&b->errors[BACKING_READ], memory_order_relaxed);
	st->write_errors = atomic_load_explicit(&b->errors[BACKING_WRITE], memory_order_relaxed);
	st->read_busy_sync = atomic_load_explicit(&b->read_busy_sync, memory_order_relaxed);
	st->uring_ios = atomic_load_explicit(&b->uring_ios, memory_order_relaxed);
	st->slot_size = b->slot_size;
	st->uring = b->uring;
}
