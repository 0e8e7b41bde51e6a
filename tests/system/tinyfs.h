/*
 * tinyfs.h - a full disk on demand, for the system tests of what writes to files: a tmpfs
 * of a few KiB mounted on a fresh directory under /tmp.
 *
 * Root only. The mount is made in a private mount namespace when the kernel lets us make
 * one, so that it dies with the process; and it is taken down (and the directory removed)
 * at tinyfs_cleanup(), also when the test dies of a signal.
 */
#ifndef ZF_TINYFS_H
#define ZF_TINYFS_H

#include <stdint.h>

/* The mount point, valid after tinyfs_mount() returned 0. */
extern char tinyfs_dir[64];

/*
 * Mounts a tmpfs of bytes bytes on a new directory named after name. Returns 0, 77 (not
 * root, or the mount failed: the test is skipped; a line says why) or 1 (the directory
 * could not be made).
 */
int tinyfs_mount(const char *name, unsigned bytes);

/* Unmounts and removes the directory (async-signal-safe). */
void tinyfs_cleanup(void);

/* The free bytes of the filesystem. */
uint64_t tinyfs_free_bytes(void);

#endif /* ZF_TINYFS_H */
