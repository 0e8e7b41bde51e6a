/*
 * run_internal.h - the preload runtime (libzfolio-run.so): what its files share.
 *
 * The runtime puts an unmodified program's anonymous memory in a zfolio region: the
 * program's private anonymous mmap()s of at least min_size bytes are carved out of one
 * large region (the arena, run_arena.c), and its heap comes from mimalloc, whose own
 * memory it maps the same way (run_heap.c). munmap(), mremap() and madvise() of arena
 * memory are the runtime's to answer (run_map.c); everything else stays with the kernel.
 * docs/run.md says why, and what it does not cover.
 */
#ifndef ZF_RUN_INTERNAL_H
#define ZF_RUN_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/common.h"

/* The calls the runtime interposes: the only symbols libzfolio-run.so exports (run.map). */
#define RUN_EXPORT __attribute__((visibility("default")))

/* What the environment asked for (run.c, run_config_load()); docs/run.md lists it. */
struct run_config {
	uint64_t limit; /* ZFOLIO_LIMIT: resident bytes; 0: none */
	uint32_t unit; /* ZFOLIO_UNIT */
	uint32_t frame; /* ZFOLIO_FRAME: ZF_FRAME_2M or 0 */
	char codec[32]; /* ZFOLIO_CODEC */
	unsigned engines; /* ZFOLIO_ENGINES */
	int mode; /* ZFOLIO_MODE: enum zf_fault_mode */
	size_t min_size; /* ZFOLIO_MIN_SIZE: smaller mappings stay with the kernel */
	size_t arena; /* ZFOLIO_ARENA: the region's size (address space, not memory) */
	char stats[256]; /* ZFOLIO_STATS: a file the counters go to at exit, or "" */
	char group[256]; /* ZFOLIO_GROUP: the run's group (its limit replaces ZFOLIO_LIMIT) */
	int quiet; /* ZFOLIO_QUIET=1: no warning when the runtime cannot start */
};

/* A range of free addresses in the arena, [start, end). */
struct run_range {
	uintptr_t start, end;
};

/* The arena: the region's address space, handed out to mappings (run_arena.c). */
struct run_arena {
	uintptr_t base, end;
	size_t align; /* every mapping starts on this (the store's unit, 64 KiB at least) */
	pthread_mutex_t lock;
	struct run_range *free; /* sorted, disjoint, not adjacent */
	size_t nfree, cap;
	size_t mapped; /* bytes handed out */
	/*
	 * Addresses from top up were never handed out: they have the region's protection
	 * (read-write) and no pages, so a mapping there needs no mprotect() (which takes the
	 * mm's lock for writing, and waits for a fault zeroing a huge page to end).
	 */
	uintptr_t top;
	/* Addresses the kernel mapped something else over: no longer the region's. */
	struct run_range *lost;
	size_t nlost, caplost;
};

int run_arena_init(struct run_arena *a, void *base, size_t size, size_t align);
/*
 * An address for len bytes (rounded up to align), aligned to align or more; NULL if none.
 * *fresh: 1 if none of it was ever handed out before.
 */
void *run_arena_take(struct run_arena *a, size_t len, int *fresh);
/* Takes [addr, addr + len) if all of it is free: 0, or -1. */
int run_arena_take_at(struct run_arena *a, uintptr_t addr, size_t len);
/* Gives [addr, addr + len) back (parts already free are fine). */
void run_arena_give(struct run_arena *a, uintptr_t addr, size_t len);
/* [addr, addr + len) is the kernel's from now on: never handed out again. */
void run_arena_lose(struct run_arena *a, uintptr_t addr, size_t len);
/* Whether any of [addr, addr + len) is lost. */
int run_arena_lost(struct run_arena *a, uintptr_t addr, size_t len);
static inline int run_arena_has(const struct run_arena *a, uintptr_t addr, size_t len)
{
	return a->base && addr >= a->base && addr < a->end && len <= a->end - addr;
}

/* The runtime: one per process, made at the first mapping it takes (run.c). */
struct run {
	struct run_config cfg;
	zf_region *region;
	zf_group *group; /* the run's, or NULL (then the limit is this process's alone) */
	struct run_arena arena;
	uint64_t maps, unmaps, remaps, copies; /* calls answered from the arena */
};

/*
 * The runtime, made on first use, or NULL when it is off (not configured, or it could
 * not start: then everything stays with the kernel). Not from a signal handler.
 */
struct run *run_get(void);
/* The runtime if it is made, else NULL; never makes it. */
struct run *run_peek(void);

/* The kernel's calls, past the interposed ones (run_map.c). */
void *run_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int run_sys_munmap(void *addr, size_t len);
int run_sys_madvise(void *addr, size_t len, int advice);
int run_sys_mprotect(void *addr, size_t len, int prot);

/* The heap (run_heap.c): loads mimalloc, after which program allocations go there. */
void run_heap_start(void);
/* New allocations to the C library's malloc from now on (the runtime could not start). */
void run_heap_stop(void);

#endif /* ZF_RUN_INTERNAL_H */
