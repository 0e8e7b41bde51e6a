/*
 * region_uffd.c - the region's userfaultfd: opening it, probing its features,
 * registering the region's memory, and placing pages into it.
 *
 * Opening falls back from the system call to /dev/userfaultfd, then to user-mode-only
 * faults (vm.unprivileged_userfaultfd=0 refuses the first to non-root users). Features
 * are probed on a throwaway descriptor, since a second UFFDIO_API on one is refused; the
 * region asks for the events (REMOVE, UNMAP, REMAP), UFFDIO_MOVE (eviction takes pages
 * away with it: Linux 6.8), SIGBUS mode when chosen, and POISON when the kernel has it
 * (failing closed in thread mode).
 *
 * Placing pages: UFFDIO_COPY and UFFDIO_ZEROPAGE answer a fault and wake the threads
 * waiting on the range. Their failures are part of the protocol, not errors: EEXIST
 * means a page is there already (a duplicate fault, served meanwhile: the rest goes
 * page by page and the page's waiters are woken), EAGAIN that the layout is changing
 * (an event is queued: the caller retries once it is read), ENOENT/ESRCH that the range
 * is gone - or, for a range of several pages, that it spans two of the program's
 * mappings (it mprotect()ed part of a unit): the range then goes in halves.
 * UFFDIO_MOVE (region_move()) takes pages out of the program's mapping into a staging
 * area registered with us for the moment, or gives them back.
 *
 * docs/region.md: "Setup", "Placing pages"; failure modes, rows 1-3, 11 and 12.
 */
#include <fcntl.h>
#include <sys/mman.h>

#include "region_internal.h"

/* A userfaultfd: the system call, else /dev/userfaultfd, else user-mode faults only. */
static int uffd_open(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd >= 0)
		return fd;
	if (errno == EPERM) {
		int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

		if (dev >= 0) {
			fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
			close(dev);
			if (fd >= 0)
				return fd;
		}
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
		if (fd >= 0)
			return fd;
	}
	return -errno;
}

/* The features this kernel offers (a second UFFDIO_API on one fd is refused: probe apart). */
static int uffd_probe(uint64_t *features)
{
	struct uffdio_api api = { .api = UFFD_API };
	int fd = uffd_open(), ret = 0;

	if (fd < 0)
		return fd;
	if (ioctl(fd, UFFDIO_API, &api))
		ret = -errno;
	close(fd);
	*features = api.features;
	return ret;
}

int region_uffd_register(zf_region *r)
{
	const uint64_t want = UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP |
			      UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_MOVE |
			      (r->o.fault_mode == ZF_FAULT_SIGBUS ? UFFD_FEATURE_SIGBUS : 0);
	uint64_t have;
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)r->base, .len = r->size },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
	};
	const uint64_t need_ioctls = (1ull << _UFFDIO_COPY) | (1ull << _UFFDIO_ZEROPAGE) |
				     (1ull << _UFFDIO_WAKE) | (1ull << _UFFDIO_WRITEPROTECT) |
				     (1ull << _UFFDIO_MOVE);
	const int huge = r->frames ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;

	TRY(uffd_probe(&have));
	if ((have & want) != want)
		return -ENOTSUP;
	api.features = want | (have & UFFD_FEATURE_POISON);
	r->uffd = uffd_open();
	if (r->uffd < 0)
		return r->uffd;
	r->features_asked = api.features;
	if (ioctl(r->uffd, UFFDIO_API, &api))
		return -errno;
	r->features = api.features;
	/*
	 * Without frames, no huge pages (docs/region.md, failure modes, row 12). With
	 * frames, the region and the staging area take huge pages, moved in and out whole
	 * (region_frame.c). MADV_DONTFORK: the fork policy (region.c; docs/region.md, fork).
	 */
	if (madvise(r->base, r->size, huge) || madvise(r->base, r->size, MADV_DONTFORK) ||
	    madvise(r->evict_stage, RG_CHUNK, huge) ||
	    madvise(r->evict_stage, RG_CHUNK, MADV_DONTFORK) ||
	    madvise(r->probe, ZF_UNIT_MAX, MADV_NOHUGEPAGE))
		return -errno;
	if (ioctl(r->uffd, UFFDIO_REGISTER, &reg))
		return errno == EINVAL ? -ENOTSUP : -errno;
	if ((reg.ioctls & need_ioctls) != need_ioctls)
		return -ENOTSUP;
	return 0;
}

/*
 * Registers [addr, addr + len), a run of units still the region's, with r's descriptor;
 * a run the kernel refuses whole (the program mapped something else over part of it)
 * unit by unit, and a unit refused is left to the program.
 */
static void register_run(zf_region *r, uint8_t *addr, size_t len, int arg)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)addr, .len = len },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
	};

	if (!ioctl(r->uffd, UFFDIO_REGISTER, &reg) || arg)
		return;
	for (size_t off = 0; off < len; off += r->unit)
		register_run(r, addr + off, r->unit, 1);
}

/*
 * In a child after fork() (region_fork.c): a descriptor of the child's own, with the
 * features the parent asked for, and the units that are still the region's registered
 * with it. Returns 0 or -errno.
 */
int region_uffd_reopen(zf_region *r)
{
	struct uffdio_api api = { .api = UFFD_API, .features = r->features_asked };

	r->uffd = uffd_open();
	if (r->uffd < 0)
		return r->uffd;
	if (ioctl(r->uffd, UFFDIO_API, &api))
		return -errno;
	region_live_runs(r, register_run, 0);
	return 0;
}

/*
 * A range refused whole with -ENOENT but for one page may span two of the program's
 * mappings (it mprotect()ed part of a unit: each page stays ours, but the kernel copies
 * within one mapping only), so its two halves go on their own, down to single pages.
 * A page refused on its own is gone. fill(r, dst, src, len, wp) is region_place() or
 * region_zero_fill() (src unused).
 */
static int split_range(zf_region *r, uint8_t *dst, const uint8_t *src, size_t len, int wp,
		       int (*fill)(zf_region *, uint8_t *, const uint8_t *, size_t, int))
{
	const size_t half = (len / RG_PAGE / 2) * RG_PAGE;

	TRY(fill(r, dst, src, half, wp));
	return fill(r, dst + half, src ? src + half : NULL, len - half, wp);
}

/*
 * UFFDIO_COPY of len bytes from src to dst, resuming after partial copies; a page that
 * is present already (a duplicate fault, served meanwhile) is skipped, and a range that
 * spans two of the program's mappings goes in parts. Returns 0, -EAGAIN (the layout is
 * changing: an event is queued; the caller retries after it is read), or
 * -ENOENT/-ESRCH/-EINVAL (the range is gone).
 */
int region_place(zf_region *r, uint8_t *dst, const uint8_t *src, size_t len, int wp)
{
	size_t done = 0;

	while (done < len) {
		struct uffdio_copy c = { .dst = (uintptr_t)(dst + done),
					 .src = (uintptr_t)(src + done),
					 .len = len - done,
					 .mode = wp ? UFFDIO_COPY_MODE_WP : 0 };
		int ret = uffd_range(r, UFFDIO_COPY, &c);

		/* c.copy is signed: a negative value is an error, not progress. */
		if (c.copy > 0)
			done += (size_t)c.copy;
		if (!ret)
			continue;
		if (ret == -EAGAIN && c.copy > 0)
			continue;
		if (ret == -EEXIST) {
			/* Some page of the range is there: place the rest page by page. */
			INC(r, copy_eexist);
			if (len - done <= RG_PAGE) {
				wake_range(r, dst + done, RG_PAGE);
				done += RG_PAGE;
				continue;
			}
			for (size_t off = done; off < len; off += RG_PAGE) {
				int pr = region_place(r, dst + off, src + off, RG_PAGE, wp);

				if (pr && pr != -EEXIST)
					return pr;
			}
			return 0;
		}
		if (ret == -ENOENT && len - done > RG_PAGE)
			return split_range(r, dst + done, src + done, len - done, wp, region_place);
		if (ret == -EAGAIN)
			INC(r, copy_eagain);
		return ret;
	}
	return 0;
}

static int zero_parts(zf_region *r, uint8_t *addr, const uint8_t *unused, size_t len, int wp)
{
	(void)unused;
	(void)wp;
	return region_zero_fill(r, addr, len);
}

/*
 * Maps zero pages over [addr, addr + len). Over several pages, those present already
 * are skipped (and their waiters woken), and a range that spans two of the program's
 * mappings goes in parts; a single page that is present is -EEXIST.
 */
int region_zero_fill(zf_region *r, uint8_t *addr, size_t len)
{
	struct uffdio_zeropage z = { .range = { .start = (uintptr_t)addr, .len = len } };
	int ret = uffd_range(r, UFFDIO_ZEROPAGE, &z);

	if (ret == -ENOENT && len > RG_PAGE)
		return split_range(r, addr, NULL, len, 0, zero_parts);
	if (ret != -EEXIST || len == RG_PAGE)
		return ret;
	for (size_t off = 0; off < len; off += RG_PAGE) {
		ret = region_zero_fill(r, addr + off, RG_PAGE);
		if (ret == -EEXIST)
			wake_range(r, addr + off, RG_PAGE);
		else if (ret)
			return ret;
	}
	return 0;
}

size_t region_move(zf_region *r, uint8_t *dst, uint8_t *src, size_t len, int tries, int *err)
{
	size_t done = 0;

	*err = 0;
	while (done < len) {
		struct uffdio_move m = {
			.dst = (uintptr_t)(dst + done),
			.src = (uintptr_t)(src + done),
			.len = len - done,
			.mode = UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES | UFFDIO_MOVE_MODE_DONTWAKE,
		};
		const int ret = uffd_range(r, UFFDIO_MOVE, &m);

		/* move is signed: a negative value is an error, not progress. */
		if (m.move > 0)
			done += (size_t)m.move;
		if (!ret)
			continue;
		/* EAGAIN: an event of the program's is queued (the layout is changing). */
		if (ret == -EAGAIN && (m.move > 0 || tries-- > 0)) {
			if (m.move <= 0)
				sched_yield();
			continue;
		}
		*err = ret;
		break;
	}
	return done;
}
