/*
 * image.h - memory images: files of whole 4 KiB pages of anonymous memory, in address
 * order, raw or zstd-compressed, and the writer that "zfolio capture" makes them with.
 *
 * Images are the zfolio command's input, not part of the library: this module is built
 * as a small static library (zfolio_image) beside the command, and the tests and bench/
 * helpers that read images link it too. It uses the public header only (for
 * ZF_PAGE_SIZE). The functions keep the zf_image_ names they had when they were in
 * libzfolio, so that their callers did not change; they are not exported by libzfolio.
 *
 * zstd is optional: a build with it (ZF_IMAGE_ZSTD is 1, else 0, for whoever links
 * zfolio_image) reads and writes .zst images; one without it reads and writes raw images
 * only, and gives -ENOTSUP for a zstd image or a zstd level.
 */
#ifndef ZF_IMAGE_H
#define ZF_IMAGE_H

#include <stddef.h>

#include "zfolio.h"

/*
 * A memory image is a file of whole 4 KiB pages of anonymous memory, in address order,
 * optionally compressed with zstd (recognised by its magic number, whatever the file is
 * called). zf_image_open() reads the whole image into memory. Returns 0, -ENOENT and the
 * other errors of open/read, -EBADMSG for a corrupt zstd stream, -ENOTSUP for a zstd
 * stream in a build without zstd, -EINVAL for a file that is empty or not a whole number
 * of pages, -EFBIG above max_bytes (0 = no limit), -ENOMEM.
 */
typedef struct zf_image zf_image;
int zf_image_open(const char *path, size_t max_bytes, zf_image **image);

/*
 * Wraps len bytes of an image that is already in memory (for example one compiled into
 * a program). With copy non-zero the bytes are copied (and may be zstd-compressed, as a
 * file may); with copy zero they are used in place, must be raw pages, and must outlive
 * the image. Same errors as zf_image_open().
 */
int zf_image_from_memory(const void *data, size_t len, int copy, const char *name,
			 zf_image **image);
/* Frees the image; NULL is a no-op. */
void zf_image_close(zf_image *image);
/* The pages: 4 KiB aligned, zf_image_size() bytes, valid until zf_image_close(). */
const void *zf_image_data(const zf_image *image);
size_t zf_image_size(const zf_image *image);
/* The file name it was opened from, or the name given to zf_image_from_memory(). */
const char *zf_image_name(const zf_image *image);

/*
 * Writes an image file page run by page run, so that a capture never holds the whole
 * image in memory. The file is written under a temporary name beside path and renamed
 * over path by zf_image_writer_finish(), so a failed or abandoned capture never leaves a
 * partial image behind. zstd_level 0 writes raw pages; any other level compresses the
 * file with zstd at that level.
 *
 * zf_image_writer_open() returns 0 or -errno (-EINVAL for a level zstd does not have,
 * -ENOTSUP for any level but 0 in a build without zstd). zf_image_writer_append() takes
 * whole pages (len a multiple of ZF_PAGE_SIZE) and returns 0 or -errno.
 * zf_image_writer_finish() with commit non-zero flushes, syncs and renames (returns 0 or
 * -errno; on failure the temporary file is removed); with commit zero it discards the
 * file. It always frees the writer. One writer is for one thread.
 */
typedef struct zf_image_writer zf_image_writer;
int zf_image_writer_open(const char *path, int zstd_level, zf_image_writer **writer);
int zf_image_writer_append(zf_image_writer *writer, const void *pages, size_t len);
int zf_image_writer_finish(zf_image_writer *writer, int commit);

#endif /* ZF_IMAGE_H */
