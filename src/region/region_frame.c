/*
 * region_frame.c - placing 2 MiB frames as transparent huge pages (zf_region_options.frame).
 *
 * Why: on a VM that shadows the guest's page tables, every page-table entry that maps a
 * written page costs an exit at its first access (~4.2 us a page here), whoever made it
 * (UFFDIO_COPY, the kernel's own fault); a PMD-mapped huge page costs nothing to touch
 * (../../docs/region.md, "Frames"). So with frames, a region places memory 2 MiB at a
 * time, as one huge page: the state word's unit is the frame, while the store compresses
 * it in units of zf_region_options.unit (64 KiB by default).
 *
 * Never-written memory: every frame maps the huge zero page, write-protected, before the
 * program first touches it (premap_frames(): the first frames at creation, the others a
 * block at a time at the block's first fault). A first read costs nothing and no memory;
 * a first write is a write-protect fault, answered by lifting the protection, and the
 * kernel's own huge-page fault then allocates the frame: the first touch costs what it
 * costs outside a region, plus one fault's round trip per 2 MiB.
 *
 * Swap-in, and never-written frames the program dropped: each fault context has a frame
 * of its own ("nursery": 2 MiB-aligned, MADV_HUGEPAGE, not registered with the
 * userfaultfd, so that the kernel fills it as plain memory). A swap-in decompresses the
 * frame's units into it, which the kernel backs with a huge page at the first write; a
 * first write to a dropped frame touches it (the kernel zeroes a huge page); a first
 * read maps the huge zero page there with one read. Then one UFFDIO_MOVE takes the PMD
 * into the region and wakes the faulting threads: no copy, no PTE, the nursery is empty
 * again. The move of a huge page goes whole only into an empty PMD of a THP-enabled
 * mapping; a frame whose PMD holds a page table (some of it was placed page by page, or
 * the program dropped part of it) gets the huge page split into PTEs, and a range the
 * move refuses (the program split the frame's mapping with mprotect(), or unmapped part
 * of it; a page there already) is placed as before (UFFDIO_COPY, UFFDIO_ZEROPAGE). Each
 * way is counted (thp_swpin, thp_fault_alloc, thp_zero, frame_split, frame_fallback).
 *
 * docs/region.md: "Frames".
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/test_point.h"
#include "pagemap_compat.h"
#include "region_internal.h"

/*
 * Whether all of the frame at addr is in the PAGEMAP_SCAN category now (PAGE_IS_HUGE:
 * mapped by one huge page; PAGE_IS_PFNZERO: the huge zero page): 1, 0, or -1 when the
 * kernel cannot tell (no PAGEMAP_SCAN).
 */
static int frame_is(zf_region *r, const uint8_t *addr, uint64_t category)
{
	struct page_region out;
	struct pm_scan_arg a = {
		.size = sizeof(a),
		.start = (uintptr_t)addr,
		.end = (uintptr_t)addr + r->unit,
		.vec = (uintptr_t)&out,
		.vec_len = 1,
		.category_mask = category,
		.return_mask = category,
	};
	long n;

	if (r->pagemap_fd < 0)
		return -1;
	n = ioctl(r->pagemap_fd, PAGEMAP_SCAN, &a);
	if (n < 0)
		return -1;
	return n == 1 && out.start == (uintptr_t)addr && out.end == (uintptr_t)addr + r->unit;
}

/*
 * Premaps frame u while the program runs: claimed (EMPTY to LOADING) as a fault claims
 * it, under read_lock as a placement; the huge zero page moved in without waking anyone,
 * then write-protected. Between the move and the protection a write of the program's
 * (a thread that had not faulted there yet) gets a huge page from the kernel unseen: the
 * frame is then resident (counted), as a frame opened ahead, and so is one whose
 * protection failed. 1 if u maps a page now.
 */
static int premap_live(zf_region *r, uint64_t u, struct uffdio_move *m)
{
	uint8_t *addr = unit_addr(r, u);
	int zero;

	pthread_rwlock_rdlock(&r->read_lock);
	if (unit_move(r, u, ST_EMPTY, ST_LOADING, 0, 0)) {
		pthread_rwlock_unlock(&r->read_lock);
		return 0;
	}
	m->mode = UFFDIO_MOVE_MODE_DONTWAKE;
	if (region_frame_mapped(addr) || uffd_range(r, UFFDIO_MOVE, m)) {
		pthread_rwlock_unlock(&r->read_lock);
		unit_release(r, u, ST_EMPTY, 0, 0);
		return 0;
	}
	TEST_POINT(TP_PREMAP_MOVED);
	zero = !protect(r, addr, r->unit, 1) && frame_is(r, addr, PAGE_IS_PFNZERO) == 1;
	pthread_rwlock_unlock(&r->read_lock);
	if (zero) {
		unit_release(r, u, ST_EMPTY, 0, 0);
		INC(r, thp_zero);
	} else {
		resident_add(r, 1);
		unit_release(r, u, ST_RESIDENT, 0, F_REF);
	}
	wake_range(r, addr, r->unit);
	return 1;
}

/*
 * Maps the huge zero page over the frames of [first, end) that map nothing, write-
 * protected: a first read of never-written memory then costs nothing (no fault, no
 * memory), as outside a region, and a first write is a write-protect fault, which
 * place_zeros() (region_fault.c) answers by lifting the protection: the kernel's own
 * huge-page fault then allocates the frame, as outside a region. The frames stay EMPTY
 * (the zero page is no memory), and the protection keeps the kernel from filling one
 * unseen. live: the program may be running (premap_live()); else at creation, before the
 * program has the region. Returns the frames mapped; stops at the first where the kernel
 * maps no huge zero page (THP off, use_zero_page 0): those frames stay unmapped and
 * their first touch faults (region_frame_zeros()).
 *
 * Each premapped frame costs a page table the kernel keeps for it (4 KiB a 2 MiB frame,
 * for splitting it later) and about 3 us: 32 MiB and 25 ms for a 16 GiB region, which
 * every process under zfolio run paid at its start. So creation premaps the first
 * RG_PREMAP_EAGER frames, and the rest a block at a time, at the first fault that finds a
 * frame of the block unmapped (region_frame_premap()).
 */
static uint64_t premap_frames(zf_region *r, uint64_t first, uint64_t end, int live)
{
	uint8_t *zero = region_map_aligned(r->unit);
	uint64_t u = first, mapped = 0;

	if (!zero)
		return 0;
	if (!madvise(zero, r->unit, MADV_HUGEPAGE)) {
		for (; u < end; u++) {
			struct uffdio_move m = { .dst = (uintptr_t)unit_addr(r, u),
						 .src = (uintptr_t)zero,
						 .len = r->unit };

			(void)*(volatile uint8_t *)zero;
			if (frame_is(r, zero, PAGE_IS_HUGE) != 1)
				break;
			if (live)
				mapped += (uint64_t)premap_live(r, u, &m);
			else if (uffd_range(r, UFFDIO_MOVE, &m))
				break;
			else
				mapped++;
		}
	}
	munmap(zero, r->unit);
	if (!live && mapped) {
		struct uffdio_writeprotect wp = {
			.range = { .start = (uintptr_t)unit_addr(r, first),
				   .len = mapped * r->unit },
			.mode = UFFDIO_WRITEPROTECT_MODE_WP,
		};

		(void)uffd_range(r, UFFDIO_WRITEPROTECT, &wp);
		ADD(r, thp_zero, mapped);
	}
	return mapped;
}

int region_frame_setup(zf_region *r)
{
	const uint64_t eager = ZF_MIN(r->nunits, RG_PREMAP_EAGER);
	const uint64_t blocks = (r->nunits + RG_PREMAP_BLOCK - 1) / RG_PREMAP_BLOCK;

	if (!r->frames)
		return 0;
	/* Where creation cannot premap, no fault can: no blocks to premap later. */
	if (premap_frames(r, 0, eager, 0) < eager || eager == r->nunits)
		return 0;
	r->premapped = calloc(blocks, sizeof(*r->premapped));
	if (!r->premapped)
		return -ENOMEM;
	for (uint64_t b = 0; b < eager / RG_PREMAP_BLOCK; b++)
		atomic_store_explicit(&r->premapped[b], 1, memory_order_relaxed);
	return 0;
}

/*
 * Whether the page at addr is present (/proc/self/pagemap, bit 63): the access does not
 * fault as missing. Unlike mincore(), which counts as in memory an entry that is neither
 * present nor a swap entry (a marker), where the access still faults: a fault that took
 * mincore()'s word retried for good in CI's soak. 0 when pagemap cannot tell.
 */
int region_page_present(zf_region *r, const uint8_t *addr)
{
	uint64_t pm;

	return r->pagemap_fd >= 0 &&
	       pread(r->pagemap_fd, &pm, sizeof(pm),
		     (off_t)((uintptr_t)addr / RG_PAGE * sizeof(pm))) == (ssize_t)sizeof(pm) &&
	       (pm >> 63 & 1);
}

/*
 * A fault at page, on frame u of a block not premapped yet (past the RG_PREMAP_EAGER
 * frames of creation): premaps the block, the first fault only. 1 if the page is present
 * now (the fault is answered: the access finds the huge zero page, or faults again to
 * write).
 */
int region_frame_premap(zf_region *r, uint64_t u, const uint8_t *page)
{
	const uint64_t b = u / RG_PREMAP_BLOCK;

	if (!r->premapped || atomic_load_explicit(&r->premapped[b], memory_order_relaxed) ||
	    atomic_exchange_explicit(&r->premapped[b], 1, memory_order_acq_rel))
		return 0;
	premap_frames(r, b * RG_PREMAP_BLOCK, ZF_MIN((b + 1) * RG_PREMAP_BLOCK, r->nunits), 1);
	return region_page_present(r, page);
}

/*
 * Whether the page at addr is mapped (in a never-written frame: the huge zero page, or
 * the zero page where the program dropped part of the frame and so split it).
 */
int region_frame_mapped(const uint8_t *addr)
{
	unsigned char in;

	return !mincore((void *)((uintptr_t)addr & ~(uintptr_t)(RG_PAGE - 1)), RG_PAGE, &in) &&
	       (in & 1);
}

/*
 * Sets what c's buffer holds. With frames that is whether its nursery holds a huge page
 * (a unit read, or zeros written), which the staging gauge counts (zf_region_stats).
 */
void region_buf_set(zf_region *r, struct fault_ctx *c, enum buf_state to)
{
	const int had = c->buf_state == BUF_DATA || c->buf_state == BUF_ZERO;
	const int has = to == BUF_DATA || to == BUF_ZERO;

	c->buf_state = to;
	if (!r->frames || had == has)
		return;
	if (has)
		counter_max(&r->n.staging_max, atomic_fetch_add(&r->n.staging, 1) + 1);
	else
		atomic_fetch_sub(&r->n.staging, 1);
}

/*
 * Makes c's nursery a frame of zeros: a huge page the kernel zeroes (write), or the huge
 * zero page (read). Outside read_lock: the kernel's zeroing takes a while.
 */
void region_frame_zeros(zf_region *r, struct fault_ctx *c, int write)
{
	if (c->buf_state == BUF_DATA || (c->buf_state == BUF_ZERO_READ && write)) {
		(void)madvise(c->buf, r->unit, MADV_DONTNEED); /* ours: no event */
		region_buf_set(r, c, BUF_EMPTY);
	}
	if (c->buf_state != BUF_EMPTY)
		return;
	if (write)
		*(volatile uint8_t *)c->buf = 0;
	else
		(void)*(volatile uint8_t *)c->buf;
	region_buf_set(r, c, write ? BUF_ZERO : BUF_ZERO_READ);
}

/*
 * Moves c's nursery into the frame at dst, and wakes the threads that wait on it; under
 * read_lock (as region_place()). What the move refuses is placed page by page from what
 * is left in the nursery (a swap-in's data: UFFDIO_COPY; zeros: UFFDIO_ZEROPAGE), so
 * the result is region_place()'s: placed (1: as one huge page), -EAGAIN (an event is
 * queued: nothing was placed; retry after it is read), or -ENOENT/-ESRCH/-EINVAL (the
 * range is gone).
 */
int region_frame_place(zf_region *r, struct fault_ctx *c, uint8_t *dst)
{
	const int zeros = c->buf_state == BUF_ZERO || c->buf_state == BUF_ZERO_READ;
	size_t done = 0;
	int ret = 0, huge;

	while (done < r->unit) {
		struct uffdio_move m = {
			.dst = (uintptr_t)(dst + done),
			.src = (uintptr_t)(c->buf + done),
			.len = r->unit - done,
			.mode = UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES,
		};

		ret = uffd_range(r, UFFDIO_MOVE, &m);
		if (m.move > 0)
			done += (size_t)m.move;
		if (!ret || (ret == -EAGAIN && m.move > 0))
			continue;
		break;
	}
	if (!ret) {
		region_buf_set(r, c, BUF_EMPTY);
		huge = frame_is(r, dst, PAGE_IS_HUGE);
		if (huge == 0)
			INC(r, frame_split);
		return huge > 0;
	}
	if (ret == -EAGAIN && !done)
		return ret; /* the nursery keeps what it has, for the retry */
	/* Refused: the rest as before, then the nursery starts empty again. */
	INC(r, frame_fallback);
	if (zeros)
		ret = region_zero_fill(r, dst + done, r->unit - done);
	else
		ret = region_place(r, dst + done, c->buf + done, r->unit - done, 0);
	if (ret != -EAGAIN) {
		(void)madvise(c->buf, r->unit, MADV_DONTNEED);
		region_buf_set(r, c, BUF_EMPTY);
	}
	return ret < 0 ? ret : 0;
}
