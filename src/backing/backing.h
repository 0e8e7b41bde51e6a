/*
 * backing.h - the backing tier: a file of fixed-size slots that holds compressed objects
 * written back from the pool (zswap writeback, zram's backing_dev), with batched
 * asynchronous I/O through io_uring and pread/pwrite as the fallback.
 *
 * Internal to libzfolio (the store calls it); not part of include/zfolio.h.
 *
 * Usage, as the store does it:
 *
 *   backing_alloc(b, len, &slot)           reserve ceil(len / slot_size) contiguous slots
 *   io = { slot, buf, len, BACKING_WRITE }
 *   backing_rw(b, &io, 1)                  (or many at once: one batch)
 *   io.result == 0 ? point the entry at slot, drop the pool copy
 *                  : backing_free(b, slot, len), keep the pool copy
 *   ...
 *   io = { slot, buf, len, BACKING_READ }  read it back on a fault
 *   backing_free(b, slot, len)             when the entry goes away
 *
 * The error contract: an I/O error never loses data, because this module never owns
 * data. It only moves bytes between the caller's buffers and the file, and reports
 * each I/O's outcome. On a failed write the caller still has its buffer and keeps the
 * entry where it was (in the pool); the slots it allocated stay allocated until the
 * caller frees them with backing_free() - backing_rw() never frees or allocates. On a
 * failed read the slots and whatever the file holds are unchanged; the caller keeps the
 * entry pointing at its slot and reports the error (a fault is never answered with
 * zeros). Bytes a failed write may have partly written are garbage, never read back.
 *
 * The file is scratch space: nothing is fsync'd, and its contents mean nothing without
 * the in-memory index, so it is emptied on open and given back on close.
 *
 * Thread-safety: a struct backing is safe from any thread, for every function except
 * backing_close(), which must run alone, with no I/O in flight.
 */
#ifndef ZF_BACKING_H
#define ZF_BACKING_H

#include <stdint.h>

#include "../common/common.h"

/*
 * How backing_rw() talks to the file.
 *
 * AUTO sets up io_uring if it can (else it is SYNC) and sends through it the batches it
 * makes faster: two or more ios with at least one read (reads that miss the page cache
 * reach the device together: 32 random 4 KiB reads, 2.4 ms with pread, 0.24 ms through
 * the ring on this project's test VM). A single io, or a batch of writes only, goes
 * through pread/pwrite: one syscall either way for one io, and buffered writes to one
 * file are serialized by the kernel whatever submits them, so the ring only adds a
 * hand-off to a kernel worker (measured: never faster; see backing.c for the numbers).
 * URING sends every batch through the ring (for measurements and tests).
 */
enum backing_io_mode {
	BACKING_IO_AUTO = 0, /* io_uring where it helps, if it can be set up; pread/pwrite */
	BACKING_IO_URING = 1, /* every batch through io_uring, or fail backing_open() */
	BACKING_IO_SYNC = 2, /* pread/pwrite from the calling thread, always */
};

/* The direction of one struct backing_io. */
enum backing_op {
	BACKING_READ = 0,
	BACKING_WRITE = 1,
};

#define BACKING_DEFAULT_SLOT_SIZE 4096u
#define BACKING_DEFAULT_QUEUE_DEPTH 64u
#define BACKING_DEFAULT_MAX_BYTES ((uint64_t)1 << 30)
#define BACKING_MIN_SLOT_SIZE 512u /* a sector */
#define BACKING_MAX_SLOT_SIZE ZF_UNIT_MAX
#define BACKING_MAX_QUEUE_DEPTH 4096u

struct backing_options {
	/*
	 * Where the slots live. A directory: an unnamed file in it (O_TMPFILE; on a
	 * filesystem without O_TMPFILE, a mkstemp() file unlinked at once), so nothing
	 * is left behind, even by a crash - the recommended form. Anything else: a
	 * regular file, created if missing (mode 0600) and unlinked at close, or, if it
	 * exists, truncated to 0 at open and at close and left in place: whatever it
	 * held is lost. Another backing (in any process) using the same file makes
	 * backing_open() fail with -EBUSY (flock).
	 */
	const char *path;
	/* The file's size limit, rounded down to whole slots (at least one). The file is
	 * sparse: disk space is taken only by what is written. Default 1 GiB. */
	uint64_t max_bytes;
	/* A power of two, BACKING_MIN_SLOT_SIZE..BACKING_MAX_SLOT_SIZE. Default 4096. */
	uint32_t slot_size;
	/* io_uring submission queue entries, 1..BACKING_MAX_QUEUE_DEPTH; a batch larger
	 * than this is streamed through the ring. Default 64. */
	unsigned queue_depth;
	/* enum backing_io_mode. Default BACKING_IO_AUTO. */
	int io_mode;
};

/*
 * One I/O of a batch: len bytes between buf and the file at slot * slot_size. The slots
 * must be allocated (backing_alloc() with at least len). A write writes exactly len
 * bytes (the rest of the last slot is left as it was: a hole, or old bytes); a read
 * reads exactly len bytes. result is set by backing_rw(): 0, or -errno.
 */
struct backing_io {
	uint64_t slot;
	void *buf;
	uint32_t len; /* 1..INT32_MAX */
	int op; /* enum backing_op */
	int result; /* out */
};

/*
 * Exact counters. reads/writes and bytes_read/bytes_written count the ios that
 * succeeded; read_errors/write_errors the ones that failed, for any reason (I/O error,
 * disk full, bad arguments, injected). uring_ios counts the ios sent through the ring;
 * read_busy_sync the read batches that found the ring taken by a batch with writes and
 * went through pread instead of waiting.
 */
struct backing_stats {
	uint64_t slots_total, slots_used;
	uint64_t reads, writes, bytes_read, bytes_written, read_errors, write_errors;
	uint64_t uring_ios, read_busy_sync;
	uint32_t slot_size;
	int uring; /* 1 when the ring is set up (AUTO or URING mode, io_uring works) */
};

struct backing;

/* Fills o with the defaults (path NULL: the caller must set it). */
void backing_options_init(struct backing_options *o);

/*
 * Opens the backing file described by o and stores the new backing in *out.
 * Returns 0, or:
 *   -EINVAL   o or out NULL, path NULL or empty, a bad slot_size, queue_depth or
 *             io_mode, max_bytes below one slot or above INT64_MAX, path not a
 *             directory or regular file;
 *   -EBUSY    the file is in use by another backing;
 *   -ENOSYS, -EPERM   io_mode BACKING_IO_URING, and io_uring is not there: built
 *             without liburing, or the kernel lacks it or refuses it (io_uring_disabled,
 *             seccomp), or lacks IORING_OP_READ/WRITE (before 5.6);
 *   -ENOMEM, or what open()/io_uring_queue_init() returned (-ENOENT, -EACCES, ...).
 */
int backing_open(const struct backing_options *o, struct backing **out) ZF_MUST_CHECK;

/*
 * Closes the file (unlinking it if backing_open() created it, emptying it otherwise)
 * and frees b. No other call on b may run or follow. backing_close(NULL) does nothing.
 */
void backing_close(struct backing *b);

/* The slot size, and the number of slots an object of len bytes takes. */
uint32_t backing_slot_size(const struct backing *b);
uint64_t backing_slots_for(const struct backing *b, uint32_t len);

/*
 * Reserves ceil(len / slot_size) contiguous free slots (next fit: the search starts
 * after the previous allocation and wraps) and stores the first in *slot. O(bitmap
 * words) under a mutex. Returns 0, -EINVAL (len 0) or -ENOSPC (no free run that long).
 */
int backing_alloc(struct backing *b, uint32_t len, uint64_t *slot) ZF_MUST_CHECK;

/*
 * Releases the slots backing_alloc(b, len, &slot) returned; len must be the same (or
 * take the same number of slots). The file is not touched (no hole is punched: the
 * next object written there reuses the blocks). Freeing slots that are not allocated
 * is a bug: it asserts in debug builds and is logged and ignored otherwise.
 */
void backing_free(struct backing *b, uint64_t slot, uint32_t len);

/*
 * Performs the n ios as one batch and waits for all of them. Through io_uring (see
 * enum backing_io_mode for which batches): one SQE each, submitted together (at most
 * queue_depth in flight; a longer batch refills the ring as ios complete), completions
 * reaped until the batch is done. Otherwise pread/pwrite, one io after the other, from
 * the calling thread. Short reads and writes are resubmitted for the rest; -EAGAIN and
 * -EINTR are retried (a bounded number of times).
 *
 * The ring is shared by all threads under a mutex held for a batch. A batch of reads
 * that finds it held by a batch with writes does pread() from its own thread instead
 * of waiting, so a fault's read never queues behind another thread's writeback (in
 * AUTO mode a single read never uses the ring at all). Other batches wait their turn.
 *
 * Each io's result is set: 0, or
 *   -EINVAL   op not BACKING_READ/WRITE, buf NULL, len 0 or above INT32_MAX, or the
 *             slots past the end of the file;
 *   -ENOSPC   the filesystem is full (a write);
 *   -EIO      an I/O error, or a read past the end of what was written;
 *   or another -errno of the read/write. The ios are done in no particular order, so
 *   a write must not overlap another io of its batch.
 * Returns the number of ios that failed: 0 when all succeeded. n 0 returns 0.
 */
int backing_rw(struct backing *b, struct backing_io *ios, unsigned n) ZF_MUST_CHECK;

/* Copies the counters into *st (each one exact; read together, not as one snapshot). */
void backing_get_stats(const struct backing *b, struct backing_stats *st);

#ifdef ZF_TEST_HOOKS
/*
 * A test hook: from now on, the (after_n + 1)-th io of op (BACKING_READ or
 * BACKING_WRITE) to reach backing_rw() fails with err (negative, e.g. -EIO, -ENOSPC)
 * without touching the file or the buffer; once, then I/O is normal again. err 0
 * disarms a pending injection. Counted like a real failure. Thread-safe; which io is
 * "(after_n + 1)-th" among concurrent batches is whichever gets there first.
 */
void backing_inject_error(struct backing *b, int op, uint64_t after_n, int err);
#endif

#endif /* ZF_BACKING_H */
