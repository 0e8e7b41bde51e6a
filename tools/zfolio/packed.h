/*
 * packed.h - where a bench keeps compressed units: back to back in image order, each after
 * an 8-byte gap at 8 mod 16, as a zpool slot holds an object after its header.
 *
 * A baseline that kept each unit at the start of a unit-sized slot of its own read and wrote
 * at the same addresses modulo 4 KiB in every decompression, and ran lz4 1.13-1.17x slower
 * on the AMD VM than from packed units (bench/results/store.md, fifteenth measurement).
 * Header-only (static functions): `zfolio bench store`'s bare loop keeps its units so, and
 * the bench/ helpers include it from here (bench/ builds on tools/, never the other way).
 */
#ifndef ZF_PACKED_H
#define ZF_PACKED_H

#include <stddef.h>

#define PACKED_GAP 8u /* before each unit, as a zpool object's header */
#define PACKED_ALIGN 16u /* each gap starts here, as zpool slots do */

/* Bytes a buffer needs for n units of at most unit bytes each. */
static inline size_t packed_bytes(size_t n, size_t unit)
{
	return n * (unit + PACKED_GAP + PACKED_ALIGN);
}

/* Where the next unit starts when the packed bytes end at end. */
static inline size_t packed_place(size_t end)
{
	return end + PACKED_GAP;
}

/* Where the packed bytes end once a unit of len bytes lies at place. */
static inline size_t packed_end(size_t place, size_t len)
{
	return (place + len + PACKED_ALIGN - 1) & ~(size_t)(PACKED_ALIGN - 1);
}

#endif
