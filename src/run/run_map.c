/*
 * run_map.c - the program's mmap(), munmap(), mremap() and madvise(), interposed.
 *
 * A private anonymous mapping of at least min_size bytes, with no address asked for,
 * is carved out of the arena (run_arena.c); any other stays with the kernel: smaller
 * ones, shared or file mappings, MAP_FIXED outside the arena, huge pages (MAP_HUGETLB),
 * stacks (MAP_GROWSDOWN), MAP_LOCKED, MAP_32BIT. Calls made by zfolio's own code
 * (common_internal) go straight to the kernel.
 *
 * On arena memory:
 *   - munmap(): the pages are dropped (MADV_DONTNEED: the region drops what it stored
 *     of them) and the addresses go back to the arena; the mapping stays, so the region
 *     keeps its range (docs/run.md, "The arena");
 *   - mmap(MAP_FIXED) of private anonymous memory over it: the same drop, then the
 *     protection asked; MAP_FIXED_NOREPLACE succeeds only where the arena is free;
 *     a file or shared mapping over it goes to the kernel, and those addresses leave
 *     the arena for good (the region lets go of them: its munmap rules);
 *   - mremap(): shrinking gives the tail back; growing takes the addresses after it when
 *     they are free, else (MREMAP_MAYMOVE) copies to a new arena range;
 *   - madvise(MADV_PAGEOUT) evicts into zfolio (zf_region_pageout()), MADV_COLD and
 *     MADV_WILLNEED are the region's advice, MADV_FREE is a MADV_DONTNEED (below);
 *     MADV_DOFORK is ignored (the region decides what a child gets); the rest go to
 *     the kernel, which tells the region (DONTNEED: its events).
 */
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "run_internal.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

void *run_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int run_sys_munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

int run_sys_madvise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

int run_sys_mprotect(void *addr, size_t len, int prot)
{
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

static void *sys_mremap(void *old, size_t oldlen, size_t newlen, int flags, void *new_addr)
{
	return (void *)syscall(SYS_mremap, old, oldlen, newlen, flags, new_addr);
}

static size_t page_round(size_t len)
{
	return (len + ZF_PAGE_SIZE - 1) & ~(size_t)(ZF_PAGE_SIZE - 1);
}

/* Whether a mapping of these is the arena's to give. */
static int arena_kind(const struct run *rt, size_t len, int flags, int fd)
{
	const int refused = MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_HUGETLB | MAP_GROWSDOWN |
			    MAP_LOCKED | MAP_32BIT;

	(void)fd; /* ignored with MAP_ANONYMOUS, as the kernel does */
	return (flags & MAP_ANONYMOUS) && (flags & MAP_TYPE) == MAP_PRIVATE && !(flags & refused) &&
	       len >= rt->cfg.min_size && len <= rt->arena.end - rt->arena.base;
}

/* Drops [addr, addr + len) of arena memory and gives it prot: a fresh mapping's state. */
static int renew(void *addr, size_t len, int prot)
{
	if (run_sys_madvise(addr, len, MADV_DONTNEED))
		return -1;
	return run_sys_mprotect(addr, len, prot);
}

/* An arena mapping made: MAP_POPULATE done (the region serves the faults), counted. */
static void *mapped(struct run *rt, void *p, size_t len, int prot, int flags)
{
	if (flags & MAP_POPULATE)
		(void)run_sys_madvise(p, page_round(len),
				      (prot & PROT_WRITE) ? MADV_POPULATE_WRITE
							  : MADV_POPULATE_READ);
	__atomic_fetch_add(&rt->maps, 1, __ATOMIC_RELAXED);
	return p;
}

/* A fresh arena mapping for mmap(NULL, len, prot, flags, -1, 0), or MAP_FAILED. */
static void *arena_map(struct run *rt, size_t len, int prot, int flags)
{
	int fresh = 0;
	void *p = run_arena_take(&rt->arena, len, &fresh);

	if (!p)
		return MAP_FAILED;
	/*
	 * Addresses given back were dropped then; their protection may have changed. Those
	 * never handed out are read-write: python3 maps its 1 MiB arenas so, and each
	 * mprotect() waited for the region's reader zeroing a huge page (a cold run 1.08 s
	 * with it, 0.82 s without).
	 */
	if ((!fresh || prot != (PROT_READ | PROT_WRITE)) &&
	    run_sys_mprotect(p, page_round(len), prot)) {
		run_arena_give(&rt->arena, (uintptr_t)p, len);
		return MAP_FAILED;
	}
	return mapped(rt, p, len, prot, flags);
}

/* mmap() with MAP_FIXED or MAP_FIXED_NOREPLACE at arena addresses. */
static void *arena_map_fixed(struct run *rt, void *addr, size_t len, int prot, int flags, int fd,
			     off_t off)
{
	const int anon = (flags & MAP_ANONYMOUS) && (flags & MAP_TYPE) == MAP_PRIVATE &&
			 !(flags & MAP_HUGETLB);

	if ((uintptr_t)addr & (ZF_PAGE_SIZE - 1)) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (flags & MAP_FIXED_NOREPLACE) {
		if (run_arena_take_at(&rt->arena, (uintptr_t)addr, len)) {
			errno = EEXIST;
			return MAP_FAILED;
		}
	} else {
		(void)run_arena_take_at(&rt->arena, (uintptr_t)addr, len); /* if it was free */
	}
	if (!anon || run_arena_lost(&rt->arena, (uintptr_t)addr, len)) {
		/*
		 * The kernel's: the region lets these addresses go, and so does the arena. Also
		 * anonymous memory over addresses already lost: what is there is not the region's.
		 */
		run_arena_lose(&rt->arena, (uintptr_t)addr, len);
		return run_sys_mmap(addr, len, prot, (flags & ~MAP_FIXED_NOREPLACE) | MAP_FIXED, fd,
				    off);
	}
	if (renew(addr, page_round(len), prot))
		return MAP_FAILED;
	return mapped(rt, addr, len, prot, flags);
}

RUN_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct run *rt;

	if (!common_internal && len) {
		if ((flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && (rt = run_peek()) &&
		    run_arena_has(&rt->arena, (uintptr_t)addr, len))
			return arena_map_fixed(rt, addr, len, prot, flags, fd, off);
		if (!(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) && (flags & MAP_ANONYMOUS) &&
		    (rt = run_get()) && arena_kind(rt, len, flags, fd)) {
			void *p = arena_map(rt, len, prot, flags);

			if (p != MAP_FAILED)
				return p;
		}
	}
	return run_sys_mmap(addr, len, prot, flags, fd, off);
}

RUN_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__attribute__((alias("mmap")));

RUN_EXPORT int munmap(void *addr, size_t len)
{
	struct run *rt = common_internal ? NULL : run_peek();
	uintptr_t a = (uintptr_t)addr, e;

	if (!rt || !len || !(a < rt->arena.end && a + len > rt->arena.base))
		return run_sys_munmap(addr, len);
	if (a & (ZF_PAGE_SIZE - 1)) {
		errno = EINVAL;
		return -1;
	}
	e = a + page_round(len);
	/* The parts outside the arena are the kernel's. */
	if (a < rt->arena.base && run_sys_munmap(addr, rt->arena.base - a))
		return -1;
	if (e > rt->arena.end && run_sys_munmap((void *)rt->arena.end, e - rt->arena.end))
		return -1;
	a = ZF_MAX(a, rt->arena.base);
	e = ZF_MIN(e, rt->arena.end);
	if (run_arena_lost(&rt->arena, a, e - a)) {
		/* Something of the kernel's is mapped there: unmapped, and lost for good. */
		run_arena_lose(&rt->arena, a, e - a);
		return run_sys_munmap((void *)a, e - a);
	}
	if (run_sys_madvise((void *)a, e - a, MADV_DONTNEED))
		return -1;
	run_arena_give(&rt->arena, a, e - a);
	__atomic_fetch_add(&rt->unmaps, 1, __ATOMIC_RELAXED);
	return 0;
}

/* mremap() of arena memory [old, old + oldlen). */
static void *arena_remap(struct run *rt, void *old, size_t oldlen, size_t newlen, int flags,
			 void *new_addr)
{
	const uintptr_t o = (uintptr_t)old;
	void *p;

	oldlen = page_round(oldlen);
	newlen = page_round(newlen);
	if (!newlen || (o & (ZF_PAGE_SIZE - 1)) || (flags & ~(MREMAP_MAYMOVE | MREMAP_FIXED)) ||
	    ((flags & MREMAP_FIXED) && !(flags & MREMAP_MAYMOVE))) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	__atomic_fetch_add(&rt->remaps, 1, __ATOMIC_RELAXED);
	if (!(flags & MREMAP_FIXED)) {
		if (newlen <= oldlen) {
			if (newlen < oldlen && munmap((char *)old + newlen, oldlen - newlen))
				return MAP_FAILED;
			return old;
		}
		if (!run_arena_take_at(&rt->arena, o + oldlen, newlen - oldlen))
			return old; /* the next addresses were free: dropped already */
		if (!(flags & MREMAP_MAYMOVE)) {
			errno = ENOMEM;
			return MAP_FAILED;
		}
		p = arena_map(rt, newlen, PROT_READ | PROT_WRITE, 0);
	} else {
		const uintptr_t n = (uintptr_t)new_addr;

		if ((n & (ZF_PAGE_SIZE - 1)) || (n < o + oldlen && o < n + newlen)) {
			errno = EINVAL;
			return MAP_FAILED;
		}
		/* Where the program says: a mapping of ours made there first. */
		p = mmap(new_addr, newlen, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	}
	if (p == MAP_FAILED)
		return MAP_FAILED;
	/* Evicted units come in as they are read: the copy is the program's to pay. */
	memcpy(p, old, ZF_MIN(oldlen, newlen));
	__atomic_fetch_add(&rt->copies, 1, __ATOMIC_RELAXED);
	(void)munmap(old, oldlen);
	return p;
}

RUN_EXPORT void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
	struct run *rt = common_internal ? NULL : run_peek();
	void *new_addr = NULL;

	if (flags & MREMAP_FIXED) {
		va_list ap;

		va_start(ap, flags);
		new_addr = va_arg(ap, void *);
		va_end(ap);
	}
	if (rt && oldlen && run_arena_has(&rt->arena, (uintptr_t)old, oldlen))
		return arena_remap(rt, old, oldlen, newlen, flags, new_addr);
	return sys_mremap(old, oldlen, newlen, flags, new_addr);
}

RUN_EXPORT int madvise(void *addr, size_t len, int advice)
{
	struct run *rt = common_internal ? NULL : run_peek();

	if (!rt || !run_arena_has(&rt->arena, (uintptr_t)addr, len))
		return run_sys_madvise(addr, len, advice);
	switch (advice) {
	case MADV_PAGEOUT: {
		long n;

		common_internal++;
		n = zf_region_pageout(rt->region, addr, len);
		common_internal--;
		return n < 0 ? (errno = (int)-n, -1) : 0;
	}
	case MADV_COLD:
	case MADV_WILLNEED: {
		int ret;

		common_internal++;
		ret = zf_region_advise(rt->region, addr, len,
				       advice == MADV_COLD ? ZF_ADV_COLD : ZF_ADV_HOT);
		common_internal--;
		return ret < 0 ? (errno = -ret, -1) : 0;
	}
	case MADV_DOFORK:
		return 0;
	case MADV_FREE:
		/*
		 * The region cannot tell a MADV_FREE's event from a DONTNEED's and keeps the
		 * unit resident while the pages may still come back (F_DOUBT): a heap that
		 * frees with MADV_FREE (mimalloc does) would pin its units over the limit.
		 * Dropping them now is one of the outcomes MADV_FREE allows.
		 */
		return run_sys_madvise(addr, len, MADV_DONTNEED);
	default:
		return run_sys_madvise(addr, len, advice);
	}
}
