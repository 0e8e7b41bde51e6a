/*
 * run_heap.c - the program's heap: the malloc family, interposed, served by mimalloc.
 *
 * glibc's malloc grows its main arena with brk() and maps its other arenas and large
 * blocks through internal calls that no interposed mmap() sees: its memory cannot be
 * put in a region from outside. mimalloc (Debian's libmimalloc2.0) takes all of its
 * memory from the OS in large segments through mmap(), which run_map.c hands out of
 * the arena: so the program's malloc() is mimalloc's, and the heap lives in the region.
 *
 * mimalloc is loaded with dlopen(RTLD_LOCAL): Debian builds it to override malloc, and
 * in the global scope its malloc and its __libc_malloc would shadow the C library's.
 * Loaded locally, only this file calls it. Until it is loaded (the C library's and the
 * loader's allocations before this library's constructor), and in zfolio's own code
 * (common_internal: its threads, a SIGBUS-mode fault, the runtime's calls into the
 * library), allocations go to the C library's malloc, out of every region: zfolio's
 * store and pool must never be evicted into themselves. free() and realloc() go by the
 * pointer (mi_is_in_heap_region()), whoever calls them.
 *
 * Without mimalloc (not installed) the heap stays with the C library, and says so once.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_internal.h"

/* The C library's, exported under these names for interposers such as this one. */
void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);
void *__libc_memalign(size_t align, size_t n);

static struct {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	void *(*memalign)(size_t, size_t);
	size_t (*usable_size)(const void *);
	bool (*is_ours)(const void *);
} mi;
static atomic_int mi_on; /* mi is filled in */

void run_heap_start(void)
{
	void *h;

	common_internal++; /* dlopen() allocates */
	h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
	if (h) {
		mi.malloc = (void *(*)(size_t))dlsym(h, "mi_malloc");
		mi.calloc = (void *(*)(size_t, size_t))dlsym(h, "mi_calloc");
		mi.realloc = (void *(*)(void *, size_t))dlsym(h, "mi_realloc");
		mi.free = (void (*)(void *))dlsym(h, "mi_free");
		mi.memalign = (void *(*)(size_t, size_t))dlsym(h, "mi_malloc_aligned");
		mi.usable_size = (size_t(*)(const void *))dlsym(h, "mi_usable_size");
		mi.is_ours = (bool (*)(const void *))dlsym(h, "mi_is_in_heap_region");
	}
	common_internal--;
	if (mi.malloc && mi.calloc && mi.realloc && mi.free && mi.memalign && mi.usable_size &&
	    mi.is_ours)
		atomic_store_explicit(&mi_on, 1, memory_order_release);
	else if (!getenv("ZFOLIO_QUIET"))
		fprintf(stderr, "zfolio: libmimalloc.so.2 not found: the heap stays with the "
				"C library (only large mappings go to zfolio)\n");
}

/* Whether this thread's new allocations go to mimalloc. */
static inline int to_mi(void)
{
	return !common_internal && atomic_load_explicit(&mi_on, memory_order_acquire);
}

/* Whether p is mimalloc's (and so must go back to it). */
static inline int is_mi(const void *p)
{
	return p && atomic_load_explicit(&mi_on, memory_order_acquire) && mi.is_ours(p);
}

RUN_EXPORT void *malloc(size_t n)
{
	return to_mi() ? mi.malloc(n) : __libc_malloc(n);
}

RUN_EXPORT void *calloc(size_t n, size_t m)
{
	return to_mi() ? mi.calloc(n, m) : __libc_calloc(n, m);
}

RUN_EXPORT void free(void *p)
{
	if (is_mi(p))
		mi.free(p);
	else
		__libc_free(p);
}

RUN_EXPORT void *realloc(void *p, size_t n)
{
	if (!p)
		return malloc(n);
	return is_mi(p) ? mi.realloc(p, n) : __libc_realloc(p, n);
}

RUN_EXPORT void *reallocarray(void *p, size_t n, size_t m)
{
	size_t bytes;

	if (__builtin_mul_overflow(n, m, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, bytes);
}

RUN_EXPORT void *memalign(size_t align, size_t n)
{
	return to_mi() ? mi.memalign(n, align) : __libc_memalign(align, n);
}

RUN_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	p = memalign(align, n);
	if (!p && n)
		return ENOMEM;
	*out = p;
	return 0;
}

RUN_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (!align || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return memalign(align, n);
}

RUN_EXPORT void *valloc(size_t n)
{
	return memalign(ZF_PAGE_SIZE, n);
}

RUN_EXPORT void *pvalloc(size_t n)
{
	return memalign(ZF_PAGE_SIZE, (n + ZF_PAGE_SIZE - 1) & ~(size_t)(ZF_PAGE_SIZE - 1));
}

RUN_EXPORT size_t malloc_usable_size(void *p)
{
	static size_t (*_Atomic libc_usable)(void *);
	size_t (*f)(void *);

	if (!p)
		return 0;
	if (is_mi(p))
		return mi.usable_size(p);
	/* The C library's own, past this one (mimalloc, loaded locally, is not). */
	f = atomic_load_explicit(&libc_usable, memory_order_acquire);
	if (!f) {
		common_internal++;
		f = (size_t(*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
		common_internal--;
		atomic_store_explicit(&libc_usable, f, memory_order_release);
	}
	return f ? f(p) : 0;
}
