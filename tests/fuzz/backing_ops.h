/*
 * backing_ops.h - an op-stream interpreter for the backing tier (src/backing/backing.h,
 * internal: reached through the static test library), checked against a shadow model.
 *
 * One byte string is one scenario: backing_ops_run() opens a backing file with the
 * options of the first bytes, decodes the rest into slot allocations and frees, batches
 * of reads and writes (valid, invalid and mixed), injected I/O errors (the
 * backing_inject_error() test hook), reopens and second opens of the same file, and
 * checks every result against a model of what backing.h promises:
 *
 *  - the slots: a bitmap and the next-fit cursor. backing_alloc() must return exactly
 *    the run next fit finds (the first free run long enough at or after the cursor, then
 *    from the start), -ENOSPC exactly when there is no free run that long, -EINVAL for
 *    length 0; slots_used is the sum of the live objects' slots;
 *  - the file: an image of its bytes and its end. A write of an object's slots puts its
 *    bytes there (an injected failure leaves the file as it was); a read gives back the
 *    image's bytes, or -EIO when it reaches past the end of what was written (the file is
 *    emptied at open, whatever it held). So a slot freed and reused reads back its new
 *    owner's bytes, never the old ones, and never a neighbour's;
 *  - each io's result: -EINVAL for a bad op, a NULL buffer, length 0 or above INT32_MAX,
 *    slots past the end of the file; the injected error on the (after_n + 1)-th valid io
 *    of its direction; else 0 (a read in a batch with writes that may extend the file
 *    first may also be -EIO: the ios of a batch run in no particular order);
 *  - the counters, exactly: reads, writes and their bytes, errors by direction, ios
 *    through the ring (AUTO: batches of two or more with a read; URING: all; SYNC: none);
 *  - the file itself: an unnamed file in a directory leaves nothing; a named file the
 *    backing created is gone after backing_close(); an existing one is emptied at open
 *    and at close and left in place; a second backing_open() of a named file in use is
 *    -EBUSY and must not disturb the first.
 *
 * The format, as store_ops.h's:
 *
 *   bytes 0..1   the options (BOP_HEADER bytes; a short input reads zeros):
 *     h[0] bits 0..3  slot_size 512 << (v % 13): 512 bytes .. 2 MiB
 *          bits 4..5  io_mode: 0 AUTO, 1 URING (SYNC if the kernel refuses io_uring),
 *                     2 SYNC, 3 AUTO
 *          bits 6..7  path: 0 and 3 a directory (an unnamed file), 1 a new named
 *                     file, 2 an existing file full of old bytes
 *     h[1] bits 0..3  slots (bop_slots[]; at most BOP_MAX_FILE bytes of them)
 *          bits 4..6  queue_depth (bop_depths[])
 *          bit  7     max_bytes is not a whole number of slots (rounded down)
 *   bytes 2..    records of BOP_RECORD bytes: rec[0] the op (bits 0..3) and param (4..7),
 *                rec[1] sel, rec[2..4] a, rec[5..7] b (24-bit little-endian)
 *
 * Object numbers are taken modulo the number of live objects, so every byte string is a
 * valid scenario. Bounds: BOP_MAX_OBJECTS live objects, BOP_BUDGET_BYTES of I/O per
 * run, BOP_MAX_OPS records.
 */
#ifndef ZF_BACKING_OPS_H
#define ZF_BACKING_OPS_H

#include <stddef.h>
#include <stdint.h>

#define BOP_HEADER 2u
#define BOP_RECORD 8u
#define BOP_MAX_FILE ((uint64_t)8 << 20)
#define BOP_MAX_OBJECTS 1024u
#define BOP_MAX_BATCH 16u
#define BOP_BUDGET_BYTES ((uint64_t)64 << 20)
#define BOP_MAX_OPS 100000u

/* h[1] & 15 */
static const uint32_t bop_slots[16] = { 1,  2,	 3,   7,   8,	31,  63,  64,
					65, 100, 127, 128, 129, 255, 256, 1000 };
/* (h[1] >> 4) & 7 */
static const unsigned bop_depths[8] = { 64, 1, 2, 3, 4, 8, 32, 4096 };

/*
 * The ops, by their canonical code (rec[0] & 15); 1 is ALLOC, 6 WRITE, 8 READ.
 *
 *  ALLOC        backing_alloc() of a length from (sel % 8, a): up to a slot, a few slots
 *               +-1 byte, up to 8 slots, up to 64 KiB, up to 2 MiB, 0 (-EINVAL),
 *               more than the file (-ENOSPC), every free slot's bytes
 *  BURST        1 + b % 32 allocations of one length, until -ENOSPC
 *  FREE         backing_free() of object b; param & 1: with another length of as many
 *               slots (which backing.h allows)
 *  FREE_STRIDE  frees every (2 + sel % 4)-th object from a % stride
 *  WRITE        a batch of 1 + sel % 16 writes to distinct objects from b (stride
 *               1 + a % 5): by param % 4 the whole object, a prefix, one byte, all but
 *               up to 15 bytes
 *  READ         the same, reads (an object may be read twice in a batch)
 *  MIXED        a batch of writes and reads alternating, on distinct objects
 *  BAD          a batch of invalid ios (param picks; 7: all kinds) between valid ones;
 *               and with param & 8, backing_open() with options that must be refused
 *  INJECT       backing_inject_error(): the (b % 8 + 1)-th valid read (param & 1 == 0)
 *               or write fails with -EIO, -ENOSPC, -EINTR (sel % 4; 3: disarm)
 *  STATS        backing_get_stats(), backing_slot_size(), backing_slots_for()
 *  VERIFY       every object read back whole, in batches of up to BOP_MAX_BATCH
 *  REOPEN       backing_close() (the file goes, or is emptied, as its kind says), then
 *               backing_open() again with the same options: a fresh, empty file
 *  SECOND       a second backing_open() of the same path: -EBUSY for a named file in
 *               use (and the first one still reads back its objects), else a file of
 *               its own
 */
enum bop_code {
	BOP_ALLOC = 0,
	BOP_BURST = 2,
	BOP_FREE = 3,
	BOP_FREE_STRIDE = 4,
	BOP_WRITE = 5,
	BOP_READ = 7,
	BOP_MIXED = 9,
	BOP_BAD = 10,
	BOP_INJECT = 11,
	BOP_STATS = 12,
	BOP_VERIFY = 13,
	BOP_REOPEN = 14,
	BOP_SECOND = 15,
};

enum { BOP_NR_CODES = 16 };

static inline enum bop_code bop_of_code(unsigned code)
{
	static const uint8_t canon[BOP_NR_CODES] = {
		BOP_ALLOC, BOP_ALLOC,  BOP_BURST,  BOP_FREE,   BOP_FREE_STRIDE, BOP_WRITE,
		BOP_WRITE, BOP_READ,   BOP_READ,   BOP_MIXED,  BOP_BAD,		BOP_INJECT,
		BOP_STATS, BOP_VERIFY, BOP_REOPEN, BOP_SECOND,
	};

	return (enum bop_code)canon[code & 15];
}

/* ALLOC lengths (sel % 8). */
enum bop_len_sel {
	BOP_LEN_SLOT = 0, /* 1 + a % slot_size */
	BOP_LEN_SLOTS = 1, /* slot_size * (1 + a % 4) - 1, + 0 or + 1 by (a >> 8) % 3 */
	BOP_LEN_8SLOTS = 2, /* 1 + a % (8 * slot_size) */
	BOP_LEN_64K = 3, /* 1 + a % 64 KiB */
	BOP_LEN_2M = 4, /* 1 + a % 2 MiB */
	BOP_LEN_ZERO = 5, /* 0: -EINVAL */
	BOP_LEN_HUGE = 6, /* UINT32_MAX - a: more than any file here (-ENOSPC) */
	BOP_LEN_FREE = 7, /* the bytes of every free slot, less a % slot_size */
};

/* BAD io kinds (param % 8). */
enum bop_bad_kind {
	BOP_BAD_OP = 0, /* op 2 */
	BOP_BAD_BUF = 1, /* buf NULL */
	BOP_BAD_LEN0 = 2, /* len 0 */
	BOP_BAD_LEN_MAX = 3, /* len above INT32_MAX */
	BOP_BAD_SLOT = 4, /* a slot past the end of the file */
	BOP_BAD_TAIL = 5, /* a length that runs past the end of the file */
	BOP_BAD_NEG_OP = 6, /* op -1 */
	BOP_BAD_ALL = 7,
};

static inline void bop_put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
}

static inline uint32_t bop_get24(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

static inline void bop_encode(uint8_t *rec, enum bop_code op, unsigned param, unsigned sel,
			      uint32_t a, uint32_t b)
{
	rec[0] = (uint8_t)((unsigned)op | (param & 15) << 4);
	rec[1] = (uint8_t)sel;
	bop_put24(rec + 2, a);
	bop_put24(rec + 5, b);
}

/* What all runs so far did, for the seed generator. */
struct backing_ops_counts {
	uint64_t runs, ops[BOP_NR_CODES];
	uint64_t allocs, enospc, frees, reused_slots, wraps;
	uint64_t writes, reads, read_eio, injected, invalid_ios, uring_ios, racy_reads;
	uint64_t reopens, ebusy, bytes_compared;
};

/*
 * Runs one scenario. Returns 0; a failed check prints what was done and calls abort()
 * (with ZF_BACKING_DUMP=path, after writing the input there). Not thread-safe.
 */
int backing_ops_run(const uint8_t *data, size_t size);

/* A line printed before a failure message; NULL: none. */
void backing_ops_set_context(const char *context);

const struct backing_ops_counts *backing_ops_counts(void);

#endif /* ZF_BACKING_OPS_H */
