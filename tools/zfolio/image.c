/*
 * image.c - memory images: files of whole 4 KiB pages, raw or zstd-compressed (image.h).
 *
 * An image is read whole into anonymous memory (mmap, so it is page aligned and can
 * grow with mremap while a zstd stream of unknown length is decoded): benchmarks then
 * touch private memory, as the kernel's experiments do, and never the page cache. The
 * format is recognised by the zstd magic number, not by the file name.
 *
 * The writer streams pages into a temporary file beside the target and renames it at
 * the end, so a capture that fails half way leaves nothing that looks like an image.
 *
 * zstd is optional (ZF_IMAGE_ZSTD): without it the zstd parts below are left out, a zstd
 * stream is recognised all the same and refused with -ENOTSUP, and so is a zstd level.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if ZF_IMAGE_ZSTD
#include <zstd.h>
#endif

#include "image.h"

#define ZSTD_MAGIC_LE "\x28\xb5\x2f\xfd"

struct zf_image {
	void *data;
	size_t size;
	size_t mapped; /* bytes of the mapping; 0 when data is borrowed */
	char name[256];
};

/* A growable page-aligned buffer of anonymous memory. */
struct grow_buf {
	uint8_t *p;
	size_t len, cap, max;
};

static int grow_buf_reserve(struct grow_buf *b, size_t need)
{
	size_t cap;
	void *p;

	if (need <= b->cap)
		return 0;
	if (b->max && need > b->max)
		return -EFBIG;
	cap = b->cap ? b->cap : (size_t)4 << 20;
	while (cap < need)
		cap *= 2;
	if (b->max && cap > b->max)
		cap = (b->max + ZF_PAGE_SIZE - 1) / ZF_PAGE_SIZE * ZF_PAGE_SIZE;
	if (b->p)
		p = mremap(b->p, b->cap, cap, MREMAP_MAYMOVE);
	else
		p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static void grow_buf_free(struct grow_buf *b)
{
	if (b->p)
		munmap(b->p, b->cap);
	b->p = NULL;
}

static int grow_buf_append(struct grow_buf *b, const void *src, size_t len)
{
	const int ret = grow_buf_reserve(b, b->len + len);

	if (ret)
		return ret;
	memcpy(b->p + b->len, src, len);
	b->len += len;
	return 0;
}

#if ZF_IMAGE_ZSTD
/* A zstd stream being decoded into a grow_buf. */
struct decoder {
	ZSTD_DStream *ds;
	size_t hint; /* ZSTD_decompressStream()'s last return: 0 at the end of a frame */
};

static int decoder_open(struct decoder *d)
{
	d->ds = ZSTD_createDStream();
	d->hint = 0;
	return d->ds ? 0 : -ENOMEM;
}

/* Feeds one chunk of the stream, appending the output to b. */
static int decoder_feed(struct decoder *d, struct grow_buf *b, const void *in, size_t in_len)
{
	ZSTD_inBuffer ib = { in, in_len, 0 };

	while (ib.pos < ib.size) {
		ZSTD_outBuffer ob;
		size_t r;
		int ret = grow_buf_reserve(b, b->len + ZSTD_DStreamOutSize());

		if (ret)
			return ret;
		ob = (ZSTD_outBuffer){ b->p + b->len, b->cap - b->len, 0 };
		r = ZSTD_decompressStream(d->ds, &ob, &ib);
		if (ZSTD_isError(r))
			return -EBADMSG;
		b->len += ob.pos;
		d->hint = r;
	}
	return 0;
}

/* 0, or -EBADMSG when the stream ended inside a frame (a truncated file). */
static int decoder_close(struct decoder *d)
{
	ZSTD_freeDStream(d->ds);
	d->ds = NULL;
	return d->hint ? -EBADMSG : 0;
}
#else
struct decoder {
	int unused;
};

static int decoder_open(struct decoder *d)
{
	(void)d;
	return -ENOTSUP;
}

static int decoder_feed(struct decoder *d, struct grow_buf *b, const void *in, size_t in_len)
{
	(void)d;
	(void)b;
	(void)in;
	(void)in_len;
	return -ENOTSUP;
}

static int decoder_close(struct decoder *d)
{
	(void)d;
	return 0;
}
#endif

static int image_finish(struct grow_buf *b, const char *name, zf_image **imagep)
{
	zf_image *img;

	if (b->len == 0 || b->len % ZF_PAGE_SIZE)
		return -EINVAL;
	img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	img->data = b->p;
	img->size = b->len;
	img->mapped = b->cap;
	snprintf(img->name, sizeof(img->name), "%s", name ? name : "");
	b->p = NULL;
	*imagep = img;
	return 0;
}

static int is_zstd(const void *head, size_t len)
{
	return len >= 4 && memcmp(head, ZSTD_MAGIC_LE, 4) == 0;
}

int zf_image_open(const char *path, size_t max_bytes, zf_image **imagep)
{
	struct grow_buf b = { .max = max_bytes };
	struct decoder d;
	uint8_t *chunk = NULL;
	const size_t chunk_size = (size_t)1 << 20;
	const char *base;
	int fd, ret = 0, first = 1, zstd = 0;

	if (!path || !imagep)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	chunk = malloc(chunk_size);
	if (!chunk) {
		ret = -ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, chunk, chunk_size);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		if (first && is_zstd(chunk, (size_t)n)) {
			ret = decoder_open(&d);
			if (ret)
				goto out;
			zstd = 1;
		}
		first = 0;
		if (zstd)
			ret = decoder_feed(&d, &b, chunk, (size_t)n);
		else
			ret = grow_buf_append(&b, chunk, (size_t)n);
		if (ret)
			goto out;
	}
	if (zstd) {
		zstd = 0;
		ret = decoder_close(&d);
		if (ret)
			goto out;
	}
	base = strrchr(path, '/');
	ret = image_finish(&b, base ? base + 1 : path, imagep);
out:
	if (zstd)
		decoder_close(&d);
	free(chunk);
	grow_buf_free(&b);
	close(fd);
	return ret;
}

int zf_image_from_memory(const void *data, size_t len, int copy, const char *name,
			 zf_image **imagep)
{
	struct grow_buf b = { 0 };
	int ret;

	if (!data || !imagep || len == 0)
		return -EINVAL;
	if (!copy) {
		zf_image *img;

		if (len % ZF_PAGE_SIZE || (uintptr_t)data % ZF_PAGE_SIZE || is_zstd(data, len))
			return -EINVAL;
		img = calloc(1, sizeof(*img));
		if (!img)
			return -ENOMEM;
		img->data = (void *)(uintptr_t)data;
		img->size = len;
		snprintf(img->name, sizeof(img->name), "%s", name ? name : "");
		*imagep = img;
		return 0;
	}
	if (is_zstd(data, len)) {
		struct decoder d;

		ret = decoder_open(&d);
		if (ret)
			return ret;
		ret = decoder_feed(&d, &b, data, len);
		if (decoder_close(&d) && !ret)
			ret = -EBADMSG;
	} else {
		ret = grow_buf_append(&b, data, len);
	}
	if (!ret)
		ret = image_finish(&b, name, imagep);
	grow_buf_free(&b);
	return ret;
}

void zf_image_close(zf_image *img)
{
	if (!img)
		return;
	if (img->mapped)
		munmap(img->data, img->mapped);
	free(img);
}

const void *zf_image_data(const zf_image *img)
{
	return img->data;
}

size_t zf_image_size(const zf_image *img)
{
	return img->size;
}

const char *zf_image_name(const zf_image *img)
{
	return img->name;
}

struct zf_image_writer {
	int fd;
#if ZF_IMAGE_ZSTD
	ZSTD_CStream *cs; /* NULL: raw pages */
	void *out;
	size_t out_size;
#endif
	char *path, *tmp_path;
};

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

#define TMP_SUFFIX_MAX 48

/*
 * Creates "<path>.tmp.<pid>.<n>" exclusively, with mode 0666 less the umask as a plain
 * creat() would (mkstemp() would make it 0600, and the rename would keep that).
 * tmp_path holds path in its first path_len bytes and has TMP_SUFFIX_MAX bytes more.
 */
static int create_temp(char *tmp_path, size_t path_len)
{
	static unsigned counter;

	for (int tries = 0; tries < 100; tries++) {
		const unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
		int fd;

		snprintf(tmp_path + path_len, TMP_SUFFIX_MAX, ".tmp.%ld.%u", (long)getpid(), n);
		fd = open(tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0 || errno != EEXIST)
			return fd < 0 ? -1 : fd;
	}
	errno = EEXIST;
	return -1;
}

#if ZF_IMAGE_ZSTD
/* Sets the writer up to compress at level (not 0). Returns 0, -EINVAL or -ENOMEM. */
static int writer_zstd_open(zf_image_writer *w, int level)
{
	if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel())
		return -EINVAL;
	w->cs = ZSTD_createCStream();
	w->out_size = ZSTD_CStreamOutSize();
	w->out = malloc(w->out_size);
	if (!w->cs || !w->out)
		return -ENOMEM;
	/* A checksum lets the reader tell a damaged image from a valid one. */
	if (ZSTD_isError(ZSTD_CCtx_setParameter(w->cs, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(w->cs, ZSTD_c_checksumFlag, 1)))
		return -EINVAL;
	return 0;
}

static int writer_stream(zf_image_writer *w, const void *src, size_t len, ZSTD_EndDirective end)
{
	ZSTD_inBuffer ib = { src, len, 0 };
	size_t left;

	do {
		ZSTD_outBuffer ob = { w->out, w->out_size, 0 };
		int ret;

		left = ZSTD_compressStream2(w->cs, &ob, &ib, end);
		if (ZSTD_isError(left))
			return -EIO;
		ret = write_all(w->fd, w->out, ob.pos);
		if (ret)
			return ret;
	} while (end == ZSTD_e_end ? left != 0 : ib.pos < ib.size);
	return 0;
}

static int writer_write(zf_image_writer *w, const void *pages, size_t len)
{
	if (w->cs)
		return writer_stream(w, pages, len, ZSTD_e_continue);
	return write_all(w->fd, pages, len);
}

static int writer_flush(zf_image_writer *w)
{
	return w->cs ? writer_stream(w, NULL, 0, ZSTD_e_end) : 0;
}

static void writer_zstd_free(zf_image_writer *w)
{
	ZSTD_freeCStream(w->cs);
	free(w->out);
}
#else
static int writer_zstd_open(zf_image_writer *w, int level)
{
	(void)w;
	(void)level;
	return -ENOTSUP;
}

static int writer_write(zf_image_writer *w, const void *pages, size_t len)
{
	return write_all(w->fd, pages, len);
}

static int writer_flush(zf_image_writer *w)
{
	(void)w;
	return 0;
}

static void writer_zstd_free(zf_image_writer *w)
{
	(void)w;
}
#endif

int zf_image_writer_open(const char *path, int zstd_level, zf_image_writer **wp)
{
	zf_image_writer *w;
	size_t len;
	int ret;

	if (!path || !*path || !wp)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = -1;
	len = strlen(path);
	w->path = strdup(path);
	w->tmp_path = malloc(len + TMP_SUFFIX_MAX);
	if (!w->path || !w->tmp_path) {
		ret = -ENOMEM;
		goto fail;
	}
	memcpy(w->tmp_path, path, len);
	if (zstd_level) {
		ret = writer_zstd_open(w, zstd_level);
		if (ret)
			goto fail;
	}
	w->fd = create_temp(w->tmp_path, len);
	if (w->fd < 0) {
		ret = -errno;
		goto fail;
	}
	*wp = w;
	return 0;
fail:
	zf_image_writer_finish(w, 0);
	return ret;
}

int zf_image_writer_append(zf_image_writer *w, const void *pages, size_t len)
{
	if (!w || (len && !pages) || len % ZF_PAGE_SIZE)
		return -EINVAL;
	return writer_write(w, pages, len);
}

int zf_image_writer_finish(zf_image_writer *w, int commit)
{
	int ret = 0;

	if (!w)
		return -EINVAL;
	if (commit && w->fd >= 0) {
		ret = writer_flush(w);
		if (!ret && fsync(w->fd) < 0)
			ret = -errno;
	}
	if (w->fd >= 0 && close(w->fd) < 0 && !ret)
		ret = -errno;
	if (w->fd >= 0) {
		if (commit && !ret && rename(w->tmp_path, w->path) < 0)
			ret = -errno;
		if (!commit || ret)
			unlink(w->tmp_path);
	}
	writer_zstd_free(w);
	free(w->path);
	free(w->tmp_path);
	free(w);
	return commit ? ret : 0;
}
