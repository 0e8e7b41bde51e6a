/*
 * zfolio.h - the public interface of libzfolio, a compressed memory tier in user space.
 *
 * This is the only header a program needs. It has two parts, as zstd's zstd.h has:
 *  - the stable API (versions, errors, logging, codecs, the store, regions), which keeps
 *    its names, signatures and struct layouts from release to release; structs only
 *    grow at their end (see below);
 *  - the experimental API at the end of the file, behind ZF_ADVANCED (the allocator,
 *    the compression engines, pool pins, the two-step put), which may change in any
 *    release: define ZF_ADVANCED before the #include to use it.
 *
 * Conventions, for every function below:
 *  - functions that can fail return 0 or a count (int, or long for counts of units and
 *    pages) on success and a negative errno on failure (liburing's way); zf_strerror()
 *    turns a code into text. The codes and what they mean everywhere:
 *      -EINVAL   a bad argument (each function says which);
 *      -ENOMEM   memory (or address space) could not be had; nothing changed;
 *      -ENOSPC   the store's pool is full, or the backing file is;
 *      -E2BIG    data did not compress below the limit; also: an options struct larger
 *                than this library's with options it does not know set;
 *      -EBADMSG  corrupt data: a checksum mismatch or a stream that does not decode;
 *      -ENOENT   no such entry (or, from zf_codec_find, no such algorithm);
 *      -ENOTSUP  a codec or kernel feature this build or kernel lacks;
 *      -EIO      the backing file could not be read or written;
 *      -EBUSY    a resource is in use or a fixed table is full (each function says);
 *      others    passed on from the system call that failed (-EPERM, -ENOSYS, ...);
 *  - objects are opaque, made by a create function and released by a destroy
 *    function; destroy(NULL) does nothing;
 *  - an options struct begins with struct_size, which its *_options_init() sets: a
 *    program built with an older header passes a smaller struct and gets the defaults
 *    for the fields it does not know; a size that was never the struct's is -EINVAL;
 *  - stats are copied out by a getter that takes the caller's sizeof (statx's way), so
 *    that counters added at the end break no program built before them;
 *  - the library never prints, exits or aborts on bad input: its diagnostics go to the
 *    log function (zf_set_log_fn). A region that cannot serve a fault fails closed
 *    (see zf_region_create): it logs why, then the faulting thread gets SIGBUS, or the
 *    process aborts; it never hands the program a page of zeros in place of its data.
 */
#ifndef ZFOLIO_H
#define ZFOLIO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZF_API __attribute__((visibility("default")))

#define ZF_VERSION_MAJOR 0
#define ZF_VERSION_MINOR 3
#define ZF_VERSION_PATCH 0
#define ZF_VERSION_NUMBER (ZF_VERSION_MAJOR * 10000 + ZF_VERSION_MINOR * 100 + ZF_VERSION_PATCH)

/* ZF_VERSION_NUMBER of the library actually linked (may differ from the header's). */
ZF_API unsigned zf_version_number(void);
/* "MAJOR.MINOR.PATCH" of the library actually linked. */
ZF_API const char *zf_version_string(void);

/* Text for a code returned by any zf_ function (negative errno); never NULL. */
ZF_API const char *zf_strerror(int err);

/*
 * Diagnostics. The library calls fn (from any thread, possibly concurrently) for the
 * rare events worth a line of text. Without fn (or after fn NULL, which restores the
 * default) ZF_LOG_ERROR lines go to stderr, prefixed "zfolio: ", and the other levels
 * nowhere: errors are broken invariants and the message before failing closed (a region
 * fault that cannot be served, on a page that cannot be poisoned, aborts the process),
 * which must not go unsaid. fn is never called from a signal handler: in SIGBUS mode the
 * region's service thread logs a fault that cannot be served, while the faulting thread
 * waits (up to a second) before its SIGBUS goes on. Not thread-safe against concurrent
 * library calls: set it once at start.
 */
enum zf_log_level { ZF_LOG_ERROR = 0, ZF_LOG_WARN = 1, ZF_LOG_INFO = 2, ZF_LOG_DEBUG = 3 };
typedef void zf_log_fn(enum zf_log_level level, const char *msg, void *arg);
ZF_API void zf_set_log_fn(zf_log_fn *fn, void *arg);

/* ---------------------------------------------------------------------------------- */
/* Pages                                                                              */
/* ---------------------------------------------------------------------------------- */

/* zfolio's page: the unit of memory images and the smallest unit of a store. */
#define ZF_PAGE_SIZE 4096u
/* The largest unit (a PMD-sized folio on x86-64). */
#define ZF_UNIT_MAX (2u << 20)

/*
 * True when the len bytes at buf (len a non-zero multiple of 8, buf 8-byte aligned) are
 * one 64-bit value repeated, as zram's "same-filled" pages are; the value is stored in
 * *value when value is not NULL. A zero page is the same-filled page of value 0.
 */
ZF_API int zf_same_filled(const void *buf, size_t len, uint64_t *value);

/* ---------------------------------------------------------------------------------- */
/* Codecs                                                                             */
/* ---------------------------------------------------------------------------------- */

/*
 * A codec is an algorithm at a level, named by a string:
 *
 *   "lz4" "lz4:A"      LZ4, acceleration A (1 = default, up to 65537: faster, worse ratio)
 *   "lz4hc:L"          LZ4 HC, level 1..12 (default 9)
 *   "zstd:L"           Zstandard, level -131072..22, negative = fast levels (default 3)
 *   "deflate:L"        raw DEFLATE by libdeflate, level 0..12 (default 6)
 *   "isal:L"           raw DEFLATE by ISA-L igzip, level 0..3 (default 1); the software
 *                      twin of Intel IAA's deflate
 *   "lzo"              LZO1X-1
 *   "none"             a copy (for measuring everything but the compressor)
 *
 * zf_codec_find() parses a name, checks that the level is in range and that this build
 * has the backend, and returns an immutable descriptor that lives as long as the process
 * (codecs are interned: the same name always gives the same pointer, so pointers can be
 * compared). A zf_codec is safe to share between threads. Returns 0, or -EINVAL for a
 * malformed name or a level out of range, -ENOENT for an unknown algorithm, -ENOTSUP for
 * an algorithm this build was configured without.
 */
typedef struct zf_codec zf_codec;
ZF_API int zf_codec_find(const char *name, const zf_codec **codec);

/* The canonical name, with its level ("zstd:1", "lz4:1", "lzo"). */
ZF_API const char *zf_codec_name(const zf_codec *codec);

/* The algorithm alone ("zstd"). */
ZF_API const char *zf_codec_algorithm(const zf_codec *codec);

/* The level (acceleration for lz4; 0 for codecs without levels). */
ZF_API int zf_codec_level(const zf_codec *codec);

/*
 * The names of all algorithms this build has, space-separated ("lz4 lz4hc zstd ...");
 * a static string.
 */
ZF_API const char *zf_codec_algorithms(void);

/*
 * Working memory for one codec: one zf_codec_ctx per thread, reused across calls (it
 * holds the compressor's tables, so creating one per call is slow). Not thread-safe:
 * two threads need two contexts. Returns 0 or -ENOMEM.
 */
typedef struct zf_codec_ctx zf_codec_ctx;
ZF_API int zf_codec_ctx_create(const zf_codec *codec, zf_codec_ctx **ctx);
ZF_API void zf_codec_ctx_destroy(zf_codec_ctx *ctx);
ZF_API const zf_codec *zf_codec_ctx_codec(const zf_codec_ctx *ctx);

/*
 * Compresses src_len bytes (1..ZF_UNIT_MAX) from src into dst, writing at most dst_cap
 * bytes. dst_cap is the caller's "incompressible" threshold: when the output would not
 * fit, the call fails with -E2BIG and the content of dst is unspecified (but nothing
 * past dst_cap is written). zstd, libdeflate and igzip write their bit streams a word
 * at a time and need a little room to work in: with them, output that would come
 * within ZF_CODEC_SLACK bytes of dst_cap may also give -E2BIG (LZ4, LZ4 HC, LZO and
 * none are exact). A threshold is a policy, not a size to the byte, so this costs
 * nothing in practice and saves compressing twice.
 *
 * Returns the compressed length (> 0), -E2BIG, -EINVAL (src_len 0 or above ZF_UNIT_MAX),
 * or -ENOMEM.
 */
#define ZF_CODEC_SLACK 16
ZF_API int zf_codec_compress(zf_codec_ctx *ctx, const void *src, size_t src_len, void *dst,
			     size_t dst_cap);

/*
 * Decompresses src_len bytes from src into exactly dst_len bytes at dst (the original
 * length, which the caller keeps). Untrusted input is fine: corrupt or truncated
 * input, and input that decodes to any other length, returns -EBADMSG; the call never
 * reads past src + src_len nor writes past dst + dst_len. A corruption that
 * still decodes to dst_len bytes cannot be told apart here: the store's checksum
 * catches it.
 *
 * Returns dst_len, -EBADMSG, -EINVAL (dst_len 0 or above ZF_UNIT_MAX) or -ENOMEM.
 */
ZF_API int zf_codec_decompress(zf_codec_ctx *ctx, const void *src, size_t src_len, void *dst,
			       size_t dst_len);

/* ---------------------------------------------------------------------------------- */
/* Store: zfolio's zswap                                                               */
/* ---------------------------------------------------------------------------------- */

/*
 * A zf_store keeps memory that was paged out: it maps a key (an owner id, and the index
 * of a 4 KiB page in the owner's memory) to a stored unit: a compressed object in a
 * zf_pool, a same-filled value (no pool memory), or, once written back, slots of a
 * backing file. It is what a region swaps to, and where the large-folio question is
 * answered: a folio is stored either page by page (split mode, as Linux zswap does) or
 * as units of a fixed size compressed whole (unit mode, zsmalloc/zram multi-page).
 *
 * Keys and units. A put stores a folio of len bytes (a power of two, 4 KiB to 2 MiB) at
 * page index (a multiple of len / 4 KiB). It is cut into units of min(len, unit) bytes
 * (unit: 4 KiB in split mode), each one entry keyed by its first page. A put over keys
 * that are stored already replaces them. A folio is stored whole or not at all.
 *
 * Thread safety: a zf_store is safe from any thread. A get decompresses in the calling
 * thread (a wakeup costs more than decompressing a 64 KiB unit); puts compress on the
 * store's engines when it has any, the calling thread helping.
 */
typedef struct zf_store zf_store;

/* The most compression engines (threads) a store, or a zf_engines, can have. */
#define ZF_ENGINES_MAX 64

enum zf_store_when_full {
	ZF_STORE_REJECT =
		0, /* refuse puts (-ENOSPC) until the pool is under the accept threshold */
	ZF_STORE_WRITEBACK = 1, /* write the oldest entries back to the backing file first */
};

typedef struct zf_store_options {
	size_t struct_size; /* sizeof(zf_store_options), set by zf_store_options_init() */
	const char *codec; /* a codec name (zf_codec_find); default "lz4" */
	/* 0: split mode; else unit mode with this unit, a power of two 8 KiB..2 MiB. */
	uint32_t unit;
	unsigned engines; /* compression engines (threads), 0..ZF_ENGINES_MAX; default 0 */
	/*
	 * Pool limit, zswap's max_pool_percent as bytes: when the pool's pages reach it,
	 * pool_limit_hit counts and the store is full until the pool is back under
	 * accept_threshold_pct of it (zswap's accept_threshold_percent, default 90).
	 * 0: no limit (the default).
	 */
	uint64_t max_pool_bytes;
	unsigned accept_threshold_pct;
	enum zf_store_when_full when_full;
	/*
	 * A unit that compresses to incompressible_pct % of its size or more is
	 * incompressible (default 100: it did not get smaller). It is stored raw (counted
	 * in stored_incompressible_pages), or, with reject_incompressible, the put fails
	 * with -E2BIG (reject_compress_poor).
	 */
	unsigned incompressible_pct;
	int reject_incompressible;
	int verify; /* decompress and compare every unit after compressing it (IAA's verify_compress) */
	/*
	 * The backing file for writeback: a directory (an unnamed file in it, the
	 * recommended form) or a file path; NULL: no backing tier. backing_bytes: its size
	 * limit (default 1 GiB).
	 */
	const char *backing_path;
	uint64_t backing_bytes;
	/*
	 * Bytes of emptied pool pages kept for reuse instead of given back (the pool's
	 * warm_pages_max; default 2 MiB): a store that empties and refills (pageout, then
	 * swap-in, again and again) avoids a page fault per pool page. They count in
	 * pool_total_size; zf_store_compact() gives them back.
	 */
	uint64_t pool_warm_bytes;
} zf_store_options;

ZF_API void zf_store_options_init(zf_store_options *options);
/*
 * Makes a store (options NULL = defaults). Returns 0, or -EINVAL (a bad option, or a
 * struct_size that was never the options' size), -E2BIG (options from a newer header
 * with options this library does not know set), -ENOENT/-ENOTSUP (codec), -ENOMEM, or
 * the error of opening the backing file.
 */
ZF_API int zf_store_create(const zf_store_options *options, zf_store **store);
ZF_API void zf_store_destroy(zf_store *store);

/*
 * Stores the folio of len bytes at folio, for pages index .. index + len / 4 KiB - 1 of
 * owner. Returns 0, or (nothing stored, the keys keep what they had):
 *   -EINVAL  len not a power of two in 4 KiB..2 MiB, index not a multiple of its pages;
 *   -ENOSPC  the pool is full (reject policy, or writeback could not make room);
 *   -E2BIG   a unit did not compress and reject_incompressible is set;
 *   -EIO     verify found a unit that did not decompress to itself;
 *   -ENOMEM  the pool or the store could not allocate (reject_alloc_fail).
 */
ZF_API int zf_store_put(zf_store *store, uint32_t owner, uint64_t index, const void *folio,
			size_t len);

/*
 * Reads back len bytes at page index of owner into dst: a whole unit (len its size,
 * index its first page: decompressed once), or one page of it (len 4096: a multi-page
 * unit is decompressed whole into a scratch buffer and the page copied out, counted in
 * partial_loads). The entry stays; zf_store_invalidate() drops it. Returns 0, or:
 *   -ENOENT  no unit of that size holds the page (see zf_store_unit_size);
 *   -EINVAL  len neither 4096 nor the unit's size, or index not its first page;
 *   -EBADMSG the stored bytes fail their checksum or do not decompress (decompress_fail;
 *            what dst then holds is unspecified);
 *   -EIO     reading the backing file failed (the entry stays, for a retry).
 */
ZF_API int zf_store_get(zf_store *store, uint32_t owner, uint64_t index, void *dst, size_t len);

/*
 * Reads back the folio of len bytes (a power of two, 4 KiB..2 MiB) at page index of
 * owner (index a multiple of its pages) into dst: every unit stored in it, each
 * decompressed once, in place, as zswap loads a large folio (in split mode, each of its
 * pages). The units may be of any sizes, each lying whole in the folio. It takes the
 * table's lock once per 64 units and the counters' lock once, where a zf_store_get() per
 * unit takes both for each. Counted as those gets would be (zswpin, swpin_units), when
 * the whole folio came back; a failed one counts only its failure and the backing reads
 * it made (decompress_fail, bd_reads, bd_read_errors). With engines, a folio of 256 KiB
 * or more of several units decompresses on them as one batch, the calling thread
 * helping; smaller ones in the calling thread. Returns 0, or:
 *   -ENOENT  a page of the folio is not stored;
 *   -EINVAL  len or index not as above, or a unit reaches outside the folio;
 *   -EBADMSG, -EIO  as zf_store_get() (a unit fails; what dst holds is unspecified).
 */
ZF_API int zf_store_get_folio(zf_store *store, uint32_t owner, uint64_t index, void *dst,
			      size_t len);

/* The size of the unit that holds page index of owner, and its first page in *first
 * (if not NULL); -ENOENT if none does. */
ZF_API long zf_store_unit_size(zf_store *store, uint32_t owner, uint64_t index, uint64_t *first);

/*
 * Drops every unit that holds a page of index .. index + pages - 1 (whole units: the
 * other pages of a multi-page unit go too). Returns the number of units dropped.
 */
ZF_API long zf_store_invalidate(zf_store *store, uint32_t owner, uint64_t index, uint64_t pages);

/*
 * Writes back the oldest stored units until at least bytes of compressed data have left
 * the pool. Returns the pages written back (>= 0, 0 when nothing is left to write), or
 * -ENODEV (no backing file). An I/O error or a full backing file stops it early and
 * leaves every unit it could not write where it was (counted in bd_write_errors); when
 * not one unit could be written, it returns that error (-EIO, -ENOSPC, -ENOMEM).
 */
ZF_API long zf_store_writeback(zf_store *store, uint64_t bytes);

/*
 * Compacts the store's pool: the store never compacts on its own except when the pool
 * is full. Returns the pages given back, or -EINVAL (store NULL).
 */
ZF_API long zf_store_compact(zf_store *store);

/* Unit sizes, for the per-size counters: 4 KiB << order, order 0..9. */
#define ZF_STORE_ORDERS 10

/* The counters, named as the kernel names them. "pages" are 4 KiB pages. */
typedef struct zf_store_stats {
	uint64_t zswpout; /* pages stored */
	uint64_t zswpin; /* pages read back (a partial load: one page) */
	uint64_t stored_pages; /* pages held now, in any form */
	uint64_t same_filled_pages; /* of which same-filled (no pool memory) */
	uint64_t stored_incompressible_pages; /* of which raw in the pool */
	uint64_t written_back_pages; /* of which in the backing file */
	uint64_t written_back_total; /* pages ever written back */
	uint64_t orig_data_size; /* bytes held now, uncompressed */
	uint64_t compr_data_size; /* their stored bytes (pool and backing file) */
	uint64_t pool_total_size; /* bytes of the pool's pages (= mem_used_total) */
	uint64_t mem_used_total, mem_used_max, pages_compacted; /* the pool's */
	uint64_t warm_pages; /* of the pool's pages, those kept for reuse (zf_pool_stats) */
	uint64_t reject_compress_poor; /* units refused as incompressible */
	uint64_t reject_compress_fail; /* units whose compression failed or did not verify */
	uint64_t reject_alloc_fail; /* puts refused for lack of memory */
	uint64_t reject_pool_full; /* puts refused because the pool was full */
	uint64_t pool_limit_hit; /* times the pool reached max_pool_bytes */
	uint64_t decompress_fail; /* gets that found a bad checksum or did not decompress */
	uint64_t partial_loads; /* gets of one page out of a multi-page unit */
	uint64_t invalidates; /* units dropped */
	uint64_t bd_reads, bd_writes; /* backing file: units read back, written */
	uint64_t bd_read_errors, bd_write_errors;
	uint64_t zswpout_units[ZF_STORE_ORDERS]; /* units stored, by size */
	uint64_t swpin_units[ZF_STORE_ORDERS]; /* whole units read back, by size */
	uint64_t swpin_fallback[ZF_STORE_ORDERS]; /* partial loads, by the unit's size */
	/*
	 * The store's bookkeeping beside the pool's pages: its table (an entry a unit held,
	 * the buckets) and the pool's own (zf_pool_stats.meta_bytes). Not counted: the
	 * threads' codec contexts and scratch, which the codecs size.
	 */
	uint64_t meta_bytes;
} zf_store_stats;

/*
 * Copies the first size bytes of the counters (pass sizeof(*stats)) into *stats: a
 * consistent snapshot, every counter a put or get changes moves together. A larger
 * struct, from a newer header, gets zeros past what this library knows. Returns 0, or
 * -EINVAL (store or stats NULL, size 0).
 */
ZF_API int zf_store_get_stats(zf_store *store, zf_store_stats *stats, size_t size);

/*
 * The counters as text, one "name value" line each, like /proc/vmstat (per-size ones as
 * zswpout_64k, swpin_64k, swpin_fallback_64k, for the sizes seen). Writes at most cap
 * bytes (NUL-terminated when cap > 0); returns the length the whole text needs, like
 * snprintf.
 */
ZF_API size_t zf_store_stats_text(zf_store *store, char *buf, size_t cap);

/* ---------------------------------------------------------------------------------- */
/* Region: transparent compressed swap of a program's memory (userfaultfd)             */
/* ---------------------------------------------------------------------------------- */

/*
 * A zf_region is anonymous memory that the program uses through ordinary pointers and
 * that zfolio pages out to a zf_store and back in, unit by unit, through userfaultfd: an
 * evicted unit comes back whole on the first touch of any of its pages. Units leave on
 * zf_region_pageout() (madvise(MADV_PAGEOUT)'s analog) or when the resident bytes pass
 * the residency limit (a reclaim thread, second-chance clock over units).
 *
 * Memory the program never wrote reads as zeros, as anonymous memory does. What the
 * program may do to region memory, at any moment, from any thread, while zfolio pages
 * it (zf_region_pageout(), zf_region_advise(), the reclaim thread, swap-ins):
 *   - madvise(MADV_DONTNEED): the pages read as zeros once the call returns, evicted or
 *     not, and what zfolio kept of them is dropped;
 *   - madvise(MADV_FREE): as outside a region, each page reads as zeros or as before
 *     until the program writes it, and holds what it wrote from then on; evicted units
 *     read as zeros. zfolio cannot tell its event from a MADV_DONTNEED's whose pages
 *     are about to go: the pages a MADV_FREE left are not paged out until the kernel
 *     reclaims them or the program writes them (ev_remove_unzapped). Use MADV_DONTNEED
 *     for memory zfolio should not keep;
 *   - munmap() of any part: that part leaves the region; memory the program maps there
 *     afterwards (MAP_FIXED) is its own, and zfolio never touches it;
 *   - mremap() moving any part away: the memory leaves the region with its content,
 *     evicted units included, and is the program's plain memory from then on, also when
 *     it is moved back into the region's range. It stays registered with the region's
 *     userfaultfd until zf_region_destroy() (its first touches of never-written pages
 *     are served by the region, as zero pages). Threads may move and unmap memory at
 *     once, over the same addresses; races the kernel's events cannot order are left:
 *     a thread preempted between its mremap() or munmap() and its event while another
 *     moves evicted memory to the address it left and on from there before touching
 *     it, or two others do (docs/region.md, "The order of events");
 *   - mprotect(): allowed; a unit the kernel will not move out (part of it read-only)
 *     stays resident;
 *   - fork(): by default the child does not get the region (MADV_DONTFORK: it faults
 *     with SIGSEGV if it touches it); with ZF_FORK_COPY it gets a copy of it, evicted
 *     units included (zf_region_options.fork); the parent loses nothing either way.
 * Each of these either works as it would on plain memory or leaves a unit resident; none
 * loses a write, brings back dropped data or crashes zfolio. See docs/region.md, "What
 * the program may do", and zf_region_options.fault_mode for what the fast mode costs.
 *
 * Needs userfaultfd with UFFDIO_MOVE (Linux 6.8): root, or /dev/userfaultfd access, or
 * vm.unprivileged_userfaultfd; zf_region_create() returns -EPERM or -ENOSYS when the
 * kernel refuses it, -ENOTSUP when it lacks a feature.
 */
typedef struct zf_region zf_region;
/* A residency limit shared by regions of several processes: see "Groups" below. */
typedef struct zf_group zf_group;

enum zf_fault_mode {
	/*
	 * The default. Fault-service threads read the userfaultfd and serve each fault:
	 * transparent (system calls that read or write evicted memory work), at the cost
	 * of a cross-thread wakeup per fault. (Where the kernel grants userfaultfd only
	 * with UFFD_USER_MODE_ONLY - unprivileged, without /dev/userfaultfd access - system
	 * calls into evicted memory fail with EFAULT in this mode too.)
	 */
	ZF_FAULT_THREAD = 0,
	/*
	 * UFFD_FEATURE_SIGBUS: the faulting thread serves its own fault in a SIGBUS handler
	 * that zfolio installs (chaining to the program's handler for addresses outside
	 * every region). No cross-thread wakeup per fault, so faults are served sooner
	 * (bench/results/region.md). At most 64 SIGBUS-mode regions exist at once in a
	 * process. Not the default, for what it costs: a system call that touches evicted memory
	 * from the kernel (read(2) into it, O_DIRECT, /proc/PID/mem) fails with EFAULT
	 * instead of faulting it in; the program must not block SIGBUS in threads that
	 * touch the region, nor replace zfolio's handler while a region exists.
	 */
	ZF_FAULT_SIGBUS = 1,
};

enum zf_fork_policy {
	/*
	 * The default: a child of fork() does not get the region (MADV_DONTFORK: it gets
	 * SIGSEGV if it touches it); the parent loses nothing.
	 */
	ZF_FORK_NONE = 0,
	/*
	 * The child gets a copy: every byte of the region as it was at the fork, resident
	 * and evicted units alike, in a region of its own (its own userfaultfd, threads,
	 * and a copy of the store as it was), and both go on privately, as with plain
	 * memory. fork() waits for the faults and the eviction in flight to finish; pages
	 * are shared copy-on-write, the store's pool too. Through pthread_atfork() handlers
	 * (zf_region_atfork()): a raw clone() without them gives the child no region memory
	 * (SIGSEGV), never zeros. A handler installed before zfolio's must not touch region
	 * memory.
	 */
	ZF_FORK_COPY = 1,
};

enum zf_swapin_mode {
	ZF_SWAPIN_WHOLE = 0, /* a fault brings the whole unit in (decompressed once) */
	/*
	 * A fault brings in only its 4 KiB page, decompressing the unit for each page, as
	 * the kernel does when it cannot swap a large folio in: for comparison.
	 */
	ZF_SWAPIN_PER_PAGE = 1,
};

typedef struct zf_region_options {
	size_t struct_size; /* sizeof(zf_region_options), set by zf_region_options_init() */
	uint32_t unit; /* bytes, a power of two 4 KiB..2 MiB; default 64 KiB */
	/* For the region's own store (when zf_region_create() gets no store): */
	const char *codec; /* default "lz4" */
	unsigned engines; /* compression threads, default 0 */
	/*
	 * Residency limit in bytes (rounded down to units, at least two units); 0: none.
	 * Past it a reclaim thread evicts the coldest units, reclaim_batch bytes at a
	 * time (default 2 MiB, at least one unit); a fault that would take the region past
	 * limit + reclaim_batch waits for it. So resident bytes stay under limit + batch.
	 */
	uint64_t limit;
	uint64_t reclaim_batch;
	/*
	 * Readahead: after two faults on consecutive units, a readahead thread brings in
	 * the next readahead units ahead of the faults (swap_ra, swap_ra_hit). 0: none
	 * (the default, as the kernel does none for zram). Ignored in per-page mode.
	 */
	unsigned readahead;
	enum zf_fault_mode fault_mode; /* default ZF_FAULT_THREAD */
	unsigned fault_threads; /* ZF_FAULT_THREAD: threads serving faults, default 1 */
	enum zf_swapin_mode swapin; /* default ZF_SWAPIN_WHOLE */
	/*
	 * Clean copies: a unit swapped in keeps its stored copy, and its pages are placed
	 * write-protected, until the first write drops the copy; evicting a clean unit
	 * again then costs no compression (the swap cache's idea). Default off.
	 */
	int keep_clean;
	/* The owner id of the region's pages in the store; 0: a fresh one. */
	uint32_t owner;
	/*
	 * Frames: 0 (none, the default) or ZF_FRAME_2M. With frames the region places and
	 * evicts memory 2 MiB at a time, as transparent huge pages, while the store still
	 * compresses it in units of unit bytes: a fault in an evicted frame reads all its
	 * units back and moves them in as one huge page; a first write to never-written
	 * memory gets a zeroed huge page, a first read the huge zero page (no memory). A
	 * huge page costs nothing to touch, where each 4 KiB page placed costs a hypervisor
	 * exit on a VM (docs/region.md, "Frames"); the price is 2 MiB read back for any
	 * touch of an evicted frame. Where no huge page can be had (THP "never", memory
	 * too fragmented) a frame is placed as 4 KiB pages: the same bytes, slower
	 * (zf_region_stats.thp_swpin against swpin_units). The region's memory is then
	 * 2 MiB-aligned and MADV_HUGEPAGE; zf_region_unit() is the frame. Neither clean
	 * copies (keep_clean) nor per-page swap-in go with frames (-EINVAL).
	 */
	uint32_t frame;
	/*
	 * Where the region should go, as mmap()'s address without MAP_FIXED: a hint the
	 * kernel follows where that range is free (rounded to 2 MiB); NULL: anywhere.
	 * zf_region_base() says where it went.
	 */
	void *address;
	/* What a child of fork() gets: enum zf_fork_policy, default ZF_FORK_NONE. */
	uint32_t fork;
	/*
	 * A group (zf_group_create(), zf_group_open()) the region joins: its residency limit
	 * and reclaim batch are the group's, shared with the other members (limit must be
	 * 0, or -EINVAL; reclaim_batch is ignored), and its counters are the group's to
	 * read. The group must outlive the region. A child of fork() with ZF_FORK_COPY
	 * joins it too. -ENOSPC: the group has 256 members already.
	 */
	zf_group *group;
} zf_region_options;

#define ZF_FRAME_2M (2u << 20)

ZF_API void zf_region_options_init(zf_region_options *options);

/*
 * Makes a region of size bytes (rounded up to whole units), swapping to store (which it
 * does not own and which must outlive it), or to a store of its own (unit mode with the
 * region's unit) when store is NULL. Returns 0, or:
 *   -EINVAL  a bad option or size, or a struct_size that was never the options' size;
 *   -E2BIG   options from a newer header with options this library does not know set;
 *   -EPERM, -ENOSYS  userfaultfd refused by the kernel;
 *   -ENOTSUP userfaultfd lacks a feature the options need;
 *   -EBUSY   ZF_FAULT_SIGBUS, and 64 SIGBUS-mode regions exist already;
 *   -ENOMEM, or the error of creating the store or a thread.
 *
 * Failing closed: when a fault cannot be served (the stored unit is corrupt, or cannot
 * be read back), the region logs why at ZF_LOG_ERROR and the faulting thread gets
 * SIGBUS (a poisoned page); where even that cannot be done, the process aborts.
 */
ZF_API int zf_region_create(zf_store *store, size_t size, const zf_region_options *options,
			    zf_region **region);
/*
 * Tears the region down: stops reclaim and readahead, unregisters the memory (threads
 * faulting on it at that moment are woken and see zeros where units were evicted: they
 * are using memory being freed), joins the service threads, handles the program's
 * events left (memory moved out gets its data), closes the userfaultfd (memory moved
 * out is then plain memory), unmaps the region and drops its units from the store.
 */
ZF_API void zf_region_destroy(zf_region *region);
ZF_API void *zf_region_base(const zf_region *region);
ZF_API size_t zf_region_size(const zf_region *region);
/* The unit the region evicts and places whole: its frame, with frames. */
ZF_API uint32_t zf_region_unit(const zf_region *region);
ZF_API zf_store *zf_region_store(const zf_region *region);

/*
 * Evicts every resident unit that [addr, addr + len) touches (a partly covered unit
 * goes whole): moves its pages out of the program's mapping (UFFDIO_MOVE: an access
 * meanwhile waits), stores them, drops them. A unit the store refuses (full,
 * incompressible with reject_incompressible, no memory) or the kernel will not move
 * stays resident and counts in reject. Returns the number of units evicted, or -EINVAL
 * (range outside the region).
 */
ZF_API long zf_region_pageout(zf_region *region, void *addr, size_t len);

enum zf_region_advice {
	ZF_ADV_COLD = 1, /* the units go first when reclaim next needs room */
	ZF_ADV_HOT = 2, /* in use: reclaim passes them once; evicted ones come in now */
};
/*
 * Installs zfolio's fork handlers (pthread_atfork()) now; the first zf_region_create()
 * does otherwise. Handlers installed after zfolio's may touch region memory in their
 * prepare and child handlers; those installed before may not (ZF_FORK_COPY). A program
 * or runtime that makes regions late calls this early. Idempotent.
 */
ZF_API void zf_region_atfork(void);

struct sigaction;
/*
 * sigaction(SIGBUS, act, oldact) for a program with SIGBUS-mode regions, which must not
 * replace zfolio's handler: once zfolio's handler is installed (the first SIGBUS-mode
 * region), act becomes the disposition it chains to for faults outside every region
 * (its sa_handler or sa_sigaction called from zfolio's handler; sa_mask and SA_ONSTACK
 * do not apply), and oldact gets the one it replaces; before, it is sigaction() itself.
 * The preload runtime routes the program's sigaction() and signal() calls for SIGBUS
 * here. Returns 0, or -errno.
 */
ZF_API int zf_sigbus_action(const struct sigaction *act, struct sigaction *oldact);

/* Returns 0, or -EINVAL (range outside the region or unknown advice). */
ZF_API int zf_region_advise(zf_region *region, void *addr, size_t len,
			    enum zf_region_advice advice);

/* Fault-service latency histogram buckets: see zf_region_stats. */
#define ZF_REGION_LAT_BUCKETS 64

/*
 * The region's counters. Pages are 4 KiB. The per-size arrays are there so the figures
 * read like the kernel's per-order stats; only one index moves: log2 of what the region
 * evicts and places whole (zf_region_unit(): the unit, or the frame with frames) over
 * 4 KiB. The "units" counted elsewhere are those too.
 */
typedef struct zf_region_stats {
	uint64_t size, unit; /* bytes; unit: what the store compresses as one object */
	uint64_t frame; /* bytes: zf_region_options.frame (the per-size arrays are by it) */
	uint64_t resident_bytes, resident_max; /* units resident (zero-filled or swapped in) */
	uint64_t evicted_units; /* units in the store now */
	uint64_t swpout, swpin; /* pages out (evicted), pages in (from the store) */
	uint64_t swpout_units[ZF_STORE_ORDERS], swpin_units[ZF_STORE_ORDERS];
	uint64_t swpin_fallback[ZF_STORE_ORDERS]; /* per-page swap-ins, by the unit's size */
	uint64_t pgmajfault; /* faults served from the store */
	uint64_t pgfault_zero; /* faults served with zeros (memory never written) */
	uint64_t wp_faults; /* writes to write-protected pages (clean copies) */
	uint64_t fault_waits; /* faults that waited for an eviction or another swap-in */
	uint64_t limit_waits; /* faults that waited for reclaim (at limit + batch) */
	uint64_t evict_pageout, evict_reclaim; /* units evicted, by cause */
	uint64_t reject; /* units the store refused or the kernel kept: they stayed resident */
	uint64_t clean_kept; /* swap-ins that kept their stored copy */
	uint64_t clean_evict; /* evictions of clean units: no compression */
	uint64_t clean_dropped; /* clean copies dropped by a write, or a refused eviction */
	uint64_t swap_ra, swap_ra_hit; /* units read ahead; of them, used before evicted */
	uint64_t ev_remove, ev_unmap, ev_remap; /* the program's madvise/munmap/mremap */
	/*
	 * REMOVEs handled without the program's zap (MADV_FREE, or a MADV_DONTNEED zap later
	 * than 10 ms): the pages left stay resident, write-protected, until zapped or written.
	 */
	uint64_t ev_remove_unzapped;
	uint64_t copy_eagain, copy_eexist; /* UFFDIO_COPY retries, already-present answers */
	uint64_t fault_fail; /* faults that could not be served (SIGBUS) */
	/*
	 * Fault-service latency, from the fault reaching zfolio to its resolving ioctl
	 * (thread mode: after the wakeup; SIGBUS mode: the signal handler's own time).
	 * Two buckets per power of two: bucket 2k counts faults of [2^k, 1.5 * 2^k) ns,
	 * bucket 2k + 1 those of [1.5 * 2^k, 2^(k+1)) ns (bucket 0: under 2 ns, the last:
	 * all above). The percentiles are the upper bounds of the buckets they fall in.
	 */
	uint64_t fault_lat[ZF_REGION_LAT_BUCKETS];
	uint64_t fault_p50_ns, fault_p99_ns, fault_p999_ns;
	/*
	 * Where service time goes, summed in ns: fault_ns over the faults the histogram
	 * counts; of the major faults' time, swapin_load_ns reading the unit from the store
	 * (lookup, decompression, checksum) and swapin_place_ns placing it (UFFDIO_COPY).
	 */
	uint64_t fault_ns, swapin_load_ns, swapin_place_ns;
	/*
	 * Frames: swap-ins placed as one huge page (the rest of swpin_units landed as 4 KiB
	 * pages), never-written frames placed as a zeroed huge page (first write) or as the
	 * huge zero page (first read), frames whose huge page was split as it was placed
	 * (the frame's PMD held a page table: part of it had been placed page by page or
	 * dropped), and frames placed page by page (the move refused: the program split the
	 * frame's mapping, or a page was there).
	 */
	uint64_t thp_swpin, thp_fault_alloc, thp_zero, frame_split, frame_fallback;
	/*
	 * Never-written frames whose protection was lifted ahead of a program writing its
	 * memory in order (counted resident from then; their first write is the kernel's
	 * own huge-page fault, not counted in thp_fault_alloc). fresh_filled: of them, those
	 * the region's background thread wrote first (the kernel zeroed a huge page for it,
	 * beside the program rather than in its write).
	 */
	uint64_t fresh_ahead, fresh_filled;
	/*
	 * Memory of the region's own beside the units it counts resident. staging_bytes:
	 * huge pages its fault contexts hold now, outside the region (frames: each context's
	 * nursery holds the frame it is filling, from its first touch to its move into the
	 * region; during a fault that frame is the unit's, already counted resident; left
	 * over when a placement must wait for an event, at most one frame a context);
	 * staging_max, the most at once. An eviction's staging pages are the units it
	 * evicts, counted resident until stored. meta_bytes: the region's bookkeeping (a
	 * state word a unit, the fault contexts and, without frames, their unit buffers);
	 * the store's is zf_store_stats.meta_bytes.
	 */
	uint64_t staging_bytes, staging_max, meta_bytes;
	/*
	 * ZF_FORK_COPY: units an eviction found shared with a child since a fork (the
	 * kernel will not move such pages) and gave pages of the region's own first.
	 */
	uint64_t fork_unshared;
} zf_region_stats;

/* Copies the counters as zf_store_get_stats() does. Returns 0, or -EINVAL. */
ZF_API int zf_region_get_stats(zf_region *region, zf_region_stats *stats, size_t size);
/* As text, "name value" lines (see zf_store_stats_text()). */
ZF_API size_t zf_region_stats_text(zf_region *region, char *buf, size_t cap);

/* ================================================================================== */
/* Groups: one residency limit for the regions of several processes                   */
/* ================================================================================== */

/*
 * A group is a memory cgroup's limit for regions: the resident bytes of every region
 * that joined it (zf_region_options.group), in any process, stay under the group's limit
 * plus one reclaim batch. It lives in a small shared segment (a memfd) that the
 * processes map: a fault that would pass limit + batch waits, and every member's
 * reclaim thread evicts its part of what is over the limit, in proportion to its
 * resident bytes (each member shrinks by the same fraction; within a member its clock
 * picks the units). A member that finds nothing to evict lets its faults through rather
 * than hang them, as a region alone does. Members that died (kill -9, an exec) are
 * found by their pid and their resident bytes given back. zfolio run makes one group
 * per run (docs/run.md). The members' counters can be read from any process that opens
 * the group (zf_group_members()).
 */

/*
 * Makes a group with a limit of limit resident bytes (0: none, the group only counts)
 * and a reclaim batch (0: 2 MiB), in a new memfd named "zfolio-group" (close-on-exec).
 * Returns 0, or -EINVAL (a batch larger than half the limit), -ENOMEM, or memfd_create()'s
 * or mmap()'s error.
 */
ZF_API int zf_group_create(uint64_t limit, uint64_t reclaim_batch, zf_group **group);
/*
 * Opens the group at path: a path of its memfd (/proc/PID/fd/N of a process that holds
 * it, as zfolio run passes in ZFOLIO_GROUP). Returns 0, or -EINVAL (not a group, or one
 * of another layout: another zfolio version), or open()'s or mmap()'s error.
 */
ZF_API int zf_group_open(const char *path, zf_group **group);
/* The group's memfd (in the process that made it; -1 after zf_group_open()). */
ZF_API int zf_group_fd(const zf_group *group);
/* Unmaps the group; the segment goes when the last process lets it go. */
ZF_API void zf_group_close(zf_group *group);

typedef struct zf_group_stats {
	uint64_t limit, reclaim_batch; /* bytes; limit 0: none */
	uint64_t resident_bytes, resident_max; /* every member's, now and at most */
	uint64_t members, members_max; /* regions in the group now, and at most at once */
	uint64_t joined, reaped; /* regions ever joined; of the gone, found dead */
	uint64_t reclaimed_bytes; /* evicted by reclaim, every member */
	uint64_t creator; /* the pid of the process that made the group */
} zf_group_stats;

/* Copies the group's counters as zf_store_get_stats() does. Returns 0, or -EINVAL. */
ZF_API int zf_group_get_stats(zf_group *group, zf_group_stats *stats, size_t size);

typedef struct zf_group_member {
	uint64_t pid;
	uint64_t resident_bytes; /* what the group counts for it now */
	uint64_t age_ns; /* how old the counters below are */
	zf_region_stats region;
	zf_store_stats store; /* its region's store */
} zf_group_member;

/*
 * Asks every member for its counters, waits up to timeout_ms for the answers (a member
 * answers from its reclaim thread, at once unless it is evicting), and copies up to cap
 * members into members (those that did not answer in time with their last counters,
 * age_ns telling). Members found dead are let go first. Returns the number of members,
 * or -EINVAL.
 */
ZF_API int zf_group_members(zf_group *group, zf_group_member *members, unsigned cap,
			    unsigned timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* ZFOLIO_H */

/* ================================================================================== */
/* The experimental API: define ZF_ADVANCED before including zfolio.h to get it.      */
/* ================================================================================== */

/*
 * What follows may change from one release to the next, in its names, its structs and
 * its behaviour, as zstd's ZSTD_STATIC_LINKING_ONLY section does: the allocator, the
 * compression engines and their job flags, pins on pool objects, and the store's
 * two-step put. A program that uses it should link zfolio statically, or check
 * zf_version_number() at run time. It lives outside the include guard so that a file
 * including zfolio.h a second time, now with ZF_ADVANCED, still gets it.
 */
#if defined(ZF_ADVANCED) && !defined(ZFOLIO_H_ADVANCED)
#define ZFOLIO_H_ADVANCED

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------- */
/* zpool: the allocator for compressed objects                                        */
/* ---------------------------------------------------------------------------------- */

/*
 * A zf_pool packs variable-size objects (compressed units: a few bytes to ZF_UNIT_MAX)
 * densely into runs of 4 KiB pages, the way the kernel's zsmalloc does, and gives pages
 * back to the system when objects are freed or compacted.
 *
 *  - Size classes: 16-byte steps up to 4 KiB, then steps of 1/128 of the octave up to
 *    2 MiB (the zsmalloc multi-page idea); classes that would hold the same number of
 *    objects in the same number of pages are merged. An object that fills its class's
 *    whole zspage (a "huge" class: an incompressible unit kept raw) carries no header.
 *  - zspages: runs of 1..N pages, N chosen per class to waste the least tail; objects
 *    are packed back to back and may cross page boundaries. A zspage is contiguous in
 *    the pool's address space, so an object that crosses pages is still one contiguous
 *    range: reads never copy (zsmalloc copies because its pages are physically
 *    scattered). Allocation goes to the fullest partly used zspage first.
 *  - Handles are integers (0 is never a handle), resolved through a table, so that
 *    compaction can move an object without its owner knowing.
 *  - Compaction moves objects out of sparse zspages into fuller ones of the same class,
 *    frees the emptied zspages and returns their pages (MADV_DONTNEED).
 *
 * Thread safety: a zf_pool is safe from any thread. Each size class has its own lock,
 * taken by alloc, free and compaction of that class; reads and writes take no class
 * lock, only a pin on the object's zspage that keeps compaction from moving it. The
 * owner of a handle must not free it while it reads or writes it.
 */
typedef struct zf_pool zf_pool;

typedef struct zf_pool_options {
	size_t struct_size; /* sizeof(zf_pool_options), set by zf_pool_options_init() */
	/*
	 * Compact a class automatically, from the thread that frees, when the pages
	 * compaction would give back (its pages in memory less the pages its objects
	 * fill when packed) pass this percentage of its pages in memory, and 16 pages. 0
	 * turns automatic compaction off. Default 25.
	 */
	unsigned compact_threshold_pct;
	/*
	 * Empty zspages keep their pages in memory, up to this many pages in all, for the
	 * next zspages to reuse without page faults (they count in pages_used, as
	 * warm_pages); zf_pool_compact() gives them back. Default 512 (2 MiB, the largest
	 * unit); 0 gives every empty zspage's pages back at once.
	 */
	uint64_t warm_pages_max;
} zf_pool_options;

ZF_API void zf_pool_options_init(zf_pool_options *options);

/*
 * Makes a pool (options NULL = defaults). Returns 0, -EINVAL (a bad option or
 * struct_size), -E2BIG (see zf_store_create) or -ENOMEM.
 */
ZF_API int zf_pool_create(const zf_pool_options *options, zf_pool **pool);
/* Frees the pool and every object in it. */
ZF_API void zf_pool_destroy(zf_pool *pool);

/*
 * Allocates an object of size bytes (1..ZF_UNIT_MAX) and stores its handle in *handle.
 * Its content is undefined until written. Returns 0, -EINVAL for a bad size, -ENOMEM
 * when no memory (or address space) could be had: the pool is left as it was.
 */
ZF_API int zf_pool_alloc(zf_pool *pool, size_t size, uint64_t *handle);

/* Frees an object. A handle that is not allocated is ignored. */
ZF_API void zf_pool_free(zf_pool *pool, uint64_t handle);
/* zf_pool_free() of n handles, faster: the lookups of the next ones overlap. */
ZF_API void zf_pool_free_many(zf_pool *pool, const uint64_t *handles, size_t n);

/*
 * Copies len bytes (at most the object's size) from src to the start of the object.
 * Returns 0, or -EINVAL for a handle that is not allocated or a len too large.
 */
ZF_API int zf_pool_write(zf_pool *pool, uint64_t handle, const void *src, size_t len);

/*
 * Begins a read: returns a pointer to the object's bytes inside the pool and stores its
 * size in *size (if not NULL), or NULL for a handle that is not allocated. The object
 * stays where it is (compaction waits) until zf_pool_read_end(); keep the pair short,
 * and do not call other pool functions on the same handle in between.
 */
ZF_API const void *zf_pool_read_begin(zf_pool *pool, uint64_t handle, size_t *size);
ZF_API void zf_pool_read_end(zf_pool *pool, uint64_t handle);
/*
 * zf_pool_read_begin() of n objects, ptrs[i] for handles[i], and zf_pool_read_end() of n
 * (each of them begun), faster than one at a time: the lookups of the next ones overlap.
 */
ZF_API void zf_pool_read_begin_many(zf_pool *pool, const uint64_t *handles, size_t n,
				    const void **ptrs);
ZF_API void zf_pool_read_end_many(zf_pool *pool, const uint64_t *handles, size_t n);

/* The size an object was allocated with, or 0 for a handle that is not allocated. */
ZF_API size_t zf_pool_object_size(zf_pool *pool, uint64_t handle);

/*
 * Compacts every class now. Returns the number of pages given back, or -EINVAL (pool
 * NULL). Objects being read
 * (between read_begin and read_end) stay where they are.
 *
 * An object is allocated in the smallest class that takes it. After packing each class,
 * compaction also "spills": it moves the objects on a class's last, partly used page
 * into free slots of slightly larger classes that are on pages already in memory, when
 * that lets the page go (a few hundred classes in use hold half a page each otherwise).
 * So after a compaction an object may count in a larger class than its own.
 */
ZF_API long zf_pool_compact(zf_pool *pool);

typedef struct zf_pool_stats {
	uint64_t objects; /* live objects */
	uint64_t compr_data_size; /* sum of their sizes, in bytes */
	uint64_t pages_used; /* pages with memory behind them, in all zspages */
	uint64_t mem_used_total; /* pages_used * 4 KiB */
	uint64_t mem_used_max; /* highest mem_used_total so far */
	uint64_t pages_compacted; /* pages given back by compaction (explicit and automatic) */
	uint64_t warm_pages; /* of pages_used, those of empty zspages kept for reuse */
	uint64_t compactions; /* class compaction passes run */
	uint64_t meta_bytes; /* the pool's own bookkeeping outside the pages */
} zf_pool_stats;

/* mem_used_total now, without locks (a counter): for limits checked on every put. */
ZF_API uint64_t zf_pool_mem_used(zf_pool *pool);

/*
 * A consistent snapshot of each class, summed, copied as zf_store_get_stats() does.
 * Returns 0, or -EINVAL.
 */
ZF_API int zf_pool_get_stats(zf_pool *pool, zf_pool_stats *stats, size_t size);

/* One line of the per-class table (zsmalloc's debugfs "classes" file). */
typedef struct zf_pool_class_stats {
	uint32_t class_size; /* bytes per slot */
	uint32_t max_object; /* the largest object the class takes */
	uint32_t pages_per_zspage; /* pages in each zspage */
	uint32_t objs_per_zspage;
	uint32_t huge; /* one object per zspage, no header */
	uint64_t objs_allocated; /* slots in this class's zspages */
	uint64_t objs_used; /* of which live */
	uint64_t pages_used; /* pages with memory behind them, in its zspages */
	/*
	 * The free slots, counted in whole zspages' pages (zsmalloc's zs_can_compact):
	 * compaction can at least empty that many; it may give back more, since it also
	 * returns the pages of partly used zspages that hold no object.
	 */
	uint64_t freeable;
} zf_pool_class_stats;

/* The number of size classes (after merging); the same for every pool. */
ZF_API unsigned zf_pool_class_count(void);
/*
 * Copies the line of class index (0..zf_pool_class_count()-1) as zf_store_get_stats()
 * does. Returns 0, or -EINVAL (a bad index, pool or stats NULL).
 */
ZF_API int zf_pool_class_stats_get(zf_pool *pool, unsigned index, zf_pool_class_stats *stats,
				   size_t size);

/* ---------------------------------------------------------------------------------- */
/* Engines: batch compression                                                         */
/* ---------------------------------------------------------------------------------- */

/*
 * A zf_engines is a set of N compression engines: today worker threads, each with its own
 * codec contexts, the software analog of Intel IAA's compress engines; later hardware or
 * GPU engines behind the same calls. Work comes in batches, in the shape of the kernel's
 * batch acomp API and of Intel QPL and nvCOMP: an array of jobs in, a status per job out.
 *
 * A job compresses or decompresses one buffer with one codec. Compress: src_len bytes
 * (1..ZF_UNIT_MAX) into at most dst_cap bytes, status = the compressed length or -E2BIG
 * (did not fit: see zf_codec_compress). Decompress: into exactly dst_cap bytes, status =
 * dst_cap or -EBADMSG. Any job may also end with -ENOMEM, or -EINVAL (codec, src or dst
 * NULL, an unknown op, a length out of range).
 *
 * zf_batch_submit() queues a batch's jobs and returns at once; zf_batch_wait() returns
 * when every job of the batch is done, running queued jobs of its own batch in the
 * calling thread meanwhile (so the caller is an engine too, and a batch never waits for
 * a busy engine to come back). With N = 0 the jobs run in the caller, inside wait.
 *
 * An engine takes about 64 KiB of data at a time (one job, or several small ones): no
 * lock is held across a batch, so a small urgent batch (the decompress of a fault) never
 * waits behind the compressions of a 2 MiB folio. ZF_BATCH_URGENT batches go to the head
 * of the queue.
 *
 * Thread safety: a zf_engines is safe from any thread; a zf_batch belongs to one thread
 * at a time. The jobs array and buffers must stay valid until wait returns.
 */
typedef struct zf_engines zf_engines;
typedef struct zf_batch zf_batch;

enum zf_job_op { ZF_JOB_COMPRESS = 0, ZF_JOB_DECOMPRESS = 1 };

/*
 * ZF_JOB_CHECKSUM: the engine also computes the XXH3-64 of the compressed bytes (the
 * output of a compress, the input of a decompress) into checksum, on success, the way
 * hardware engines return a CRC with their output.
 */
#define ZF_JOB_CHECKSUM 1u
/*
 * ZF_JOB_ENGINE_DST (compress jobs with a completion): the engine compresses into an
 * output buffer of its own, dst_cap bytes at most (up to ZF_UNIT_MAX), and sets dst to it
 * for the completion, which must copy what it keeps: the buffer is the next job's once
 * the completion returns, and dst is NULL again. The output stays in the cache of the
 * CPU that made it instead of streaming through a buffer per job (dst is ignored on
 * input). Any other job with it fails with -EINVAL.
 */
#define ZF_JOB_ENGINE_DST 2u

typedef struct zf_job {
	const zf_codec *codec;
	enum zf_job_op op;
	unsigned flags; /* ZF_JOB_* */
	const void *src;
	size_t src_len;
	void *dst;
	size_t dst_cap;
	int status; /* out: length (> 0) or -errno */
	uint64_t checksum; /* out, with ZF_JOB_CHECKSUM */
	/*
	 * Optional, as an acomp request's callback: called once the job has run (status and
	 * checksum set, whatever the status), by the thread that ran it, before the job counts
	 * as done. It may set status to an error of its own, which then counts as the job's.
	 * Jobs of one batch complete concurrently in different threads. It lets the output be
	 * used where it was made: a store copies each compressed unit into its pool there.
	 */
	void (*complete)(struct zf_job *job);
	void *priv; /* the caller's, for complete */
} zf_job;

/* Starts n engines (0..ZF_ENGINES_MAX). Returns 0, -EINVAL or -ENOMEM (or -errno). */
ZF_API int zf_engines_create(unsigned n, zf_engines **engines);
/*
 * Stops the engines, each after the job it is running; batches still queued are run by
 * their waiters. A batch may outlive its engines: its wait still works, and its later
 * submits run in the caller as with N = 0 (the memory goes with the last batch). Call it
 * once, when no other thread is inside a zf_engines_ call on these engines.
 */
ZF_API void zf_engines_destroy(zf_engines *engines);
/* The number of engine threads (0 for NULL). */
ZF_API unsigned zf_engines_count(const zf_engines *engines);

#define ZF_BATCH_URGENT 1u
/*
 * The waiter sleeps instead of running the batch's jobs, when there are engines (with
 * N = 0 it runs them anyway): for when the engines alone fill the CPUs, and one more
 * thread would only take turns with them. Such a batch must be waited for before
 * zf_engines_destroy().
 */
#define ZF_BATCH_NO_HELP 2u
/*
 * A batch handle, reusable for one submit/wait after another; it keeps the codec
 * contexts its waiter uses. Returns 0, -EINVAL (engines or batch NULL, unknown flags) or
 * -ENOMEM.
 */
ZF_API int zf_batch_create(zf_engines *engines, unsigned flags, zf_batch **batch);
/* Frees a batch; one with jobs not yet waited for is waited for first. */
ZF_API void zf_batch_destroy(zf_batch *batch);
/*
 * Queues n jobs (n >= 1). Returns 0, or -EBUSY when the batch has jobs not yet waited
 * for, -EINVAL for n = 0 or above INT_MAX, or a NULL batch or jobs.
 */
ZF_API int zf_batch_submit(zf_batch *batch, zf_job *jobs, size_t n);
/*
 * Waits for the submitted jobs. Returns the number of jobs whose status is < 0 (0 when
 * nothing was submitted), or -EINVAL for a NULL batch.
 */
ZF_API int zf_batch_wait(zf_batch *batch);
/* Submit and wait: the errors of either. */
ZF_API int zf_batch_run(zf_batch *batch, zf_job *jobs, size_t n);

/*
 * Counters, exact once every batch is waited for. batches and jobs count at submit,
 * jobs_by_engines as engines finish jobs, jobs_by_waiters and failed_jobs (jobs whose
 * status is < 0) when a wait returns; any snapshot has
 * jobs_by_engines + jobs_by_waiters <= jobs.
 */
typedef struct zf_engines_stats {
	uint64_t batches, jobs; /* submitted */
	uint64_t jobs_by_engines, jobs_by_waiters; /* who ran them */
	uint64_t failed_jobs;
} zf_engines_stats;
/*
 * Copies the counters as zf_store_get_stats() does (zeros for NULL engines). Returns 0,
 * or -EINVAL (stats NULL, size 0).
 */
ZF_API int zf_engines_get_stats(zf_engines *engines, zf_engines_stats *stats, size_t size);

/* ---------------------------------------------------------------------------------- */
/* Store: the two-step put                                                           */
/* ---------------------------------------------------------------------------------- */

/*
 * A put in two steps, so that one thread keeps several folios in flight and the engines
 * never wait for it between folios (the table update of one folio runs while the next
 * ones compress). zf_store_put_start() checks and admits the folio as zf_store_put()
 * does and queues its units on the store's engines (a put too small for them, or a store
 * without engines, compresses here), then returns 0 and the put in *pending, or an
 * error (-EINVAL, -ENOSPC, -ENOMEM) and NULL. zf_store_put_finish() waits for the
 * compressions and puts the folio in the table, all of it or nothing, and returns what
 * zf_store_put() would have; the put takes effect there (until then the keys keep what
 * they had; puts finished one after another replace each other in that order). The
 * folio's bytes must not change until finish returns. Every started put is finished
 * once, by any thread, before zf_store_destroy(). The pool limit is checked at the
 * start, as for concurrent puts: puts in flight together may take the pool past
 * max_pool_bytes by what they store. Each put in flight holds about 2 MiB of working
 * memory.
 */
typedef struct zf_store_pending zf_store_pending;
ZF_API int zf_store_put_start(zf_store *store, uint32_t owner, uint64_t index, const void *folio,
			      size_t len, zf_store_pending **pending);
ZF_API int zf_store_put_finish(zf_store_pending *pending);

#ifdef __cplusplus
}
#endif
#endif /* ZF_ADVANCED */
