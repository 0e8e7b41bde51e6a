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
#include <link.h>
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
static atomic_int mi_on; /* mi is filled in: mimalloc's blocks go back to it */
static atomic_int mi_off; /* new blocks from the C library: the runtime could not start */

/*
 * The code of the C library and of the loader. What they allocate stays with the C
 * library's malloc: their own structures (a thread's TLS table and blocks, which the
 * loader allocates even for a thread of zfolio's that reuses a program thread's cached
 * stack; locale data, environ, stdio buffers) are touched by zfolio's threads, and one of
 * them faulting on a unit it is evicting, or the service thread on memory only it can
 * serve, would wait for itself (run_fork's engines did, in a child, on a TLS table from a
 * cached stack). The price: what a program gets from the C library (strdup(), getline(),
 * asprintf()) is not in zfolio.
 */
static struct {
	uintptr_t lo, hi;
} libc_text[2];

static int find_text(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	int slot;

	(void)size;
	(void)arg;
	name = name ? name + 1 : info->dlpi_name;
	if (!name || (!strncmp(name, "libc.so", 7)    ? (slot = 0, 0)
		      : !strncmp(name, "ld-linux", 8) ? (slot = 1, 0)
						      : 1))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			libc_text[slot].lo = info->dlpi_addr + ph->p_vaddr;
			libc_text[slot].hi = libc_text[slot].lo + ph->p_memsz;
		}
	}
	return 0;
}

/* Whether the call came from the C library or the loader (its return address). */
static inline int from_libc(const void *ra)
{
	const uintptr_t a = (uintptr_t)ra;

	return (a >= libc_text[0].lo && a < libc_text[0].hi) ||
	       (a >= libc_text[1].lo && a < libc_text[1].hi);
}

void run_heap_start(void)
{
	void *h;

	common_internal++; /* dlopen() allocates */
	dl_iterate_phdr(find_text, NULL);
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

/*
 * The runtime could not start (no userfaultfd): the heap stays the C library's from now
 * on, as a program without the runtime has it. Blocks mimalloc gave before still go back
 * to it.
 */
void run_heap_stop(void)
{
	atomic_store_explicit(&mi_off, 1, memory_order_relaxed);
}

/* Whether an allocation called from ra goes to mimalloc. */
static inline int to_mi(const void *ra)
{
	return !common_internal && atomic_load_explicit(&mi_on, memory_order_acquire) &&
	       !atomic_load_explicit(&mi_off, memory_order_relaxed) && !from_libc(ra);
}

/* Whether p is mimalloc's (and so must go back to it). */
static inline int is_mi(const void *p)
{
	return p && atomic_load_explicit(&mi_on, memory_order_acquire) && mi.is_ours(p);
}

RUN_EXPORT void *malloc(size_t n)
{
	return to_mi(__builtin_return_address(0)) ? mi.malloc(n) : __libc_malloc(n);
}

RUN_EXPORT void *calloc(size_t n, size_t m)
{
	return to_mi(__builtin_return_address(0)) ? mi.calloc(n, m) : __libc_calloc(n, m);
}

RUN_EXPORT void free(void *p)
{
	if (is_mi(p))
		mi.free(p);
	else
		__libc_free(p);
}

/* realloc() for a caller at ra. */
static void *realloc_from(const void *ra, void *p, size_t n)
{
	if (!p)
		return to_mi(ra) ? mi.malloc(n) : __libc_malloc(n);
	return is_mi(p) ? mi.realloc(p, n) : __libc_realloc(p, n);
}

/* An aligned block for a caller at ra. */
static void *aligned_from(const void *ra, size_t align, size_t n)
{
	return to_mi(ra) ? mi.memalign(n, align) : __libc_memalign(align, n);
}

RUN_EXPORT void *realloc(void *p, size_t n)
{
	return realloc_from(__builtin_return_address(0), p, n);
}

RUN_EXPORT void *reallocarray(void *p, size_t n, size_t m)
{
	size_t bytes;

	if (__builtin_mul_overflow(n, m, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_from(__builtin_return_address(0), p, bytes);
}

RUN_EXPORT void *memalign(size_t align, size_t n)
{
	return aligned_from(__builtin_return_address(0), align, n);
}

RUN_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	p = aligned_from(__builtin_return_address(0), align, n);
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
	return aligned_from(__builtin_return_address(0), align, n);
}

RUN_EXPORT void *valloc(size_t n)
{
	return aligned_from(__builtin_return_address(0), ZF_PAGE_SIZE, n);
}

RUN_EXPORT void *pvalloc(size_t n)
{
	return aligned_from(__builtin_return_address(0), ZF_PAGE_SIZE,
			    (n + ZF_PAGE_SIZE - 1) & ~(size_t)(ZF_PAGE_SIZE - 1));
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
