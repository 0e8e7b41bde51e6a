/*
 * test_image.c - memory images (tools/zfolio/image.h): raw and zstd files (zstd refused
 * with -ENOTSUP in a build without it), in-memory images, the streaming writer (atomic
 * rename, nothing left behind on discard), every rejection path, and the same-filled page
 * check they are reported with.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "zfolio.h"
#include "image.h"
#include "testutil.h"

#define PAGES 300

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/zf-image-test.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const char *path_in_dir(const char *name)
{
	static char path[128];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static uint8_t *make_pages(size_t n)
{
	uint8_t *p = malloc(n * ZF_PAGE_SIZE);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		fill_pattern(p + i * ZF_PAGE_SIZE, ZF_PAGE_SIZE, (enum pattern)(i % PAT_COUNT), i);
	return p;
}

static int count_entries(void)
{
	char cmd[160];
	FILE *f;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d", &n), 1);
	pclose(f);
	return n;
}

static void write_image(const char *path, const uint8_t *pages, size_t n, int level)
{
	zf_image_writer *w = NULL;

	assert_int_equal(zf_image_writer_open(path, level, &w), 0);
	/* In uneven runs, as a capture appends mappings. */
	for (size_t i = 0; i < n;) {
		const size_t run = n - i < 1 + i % 7 ? n - i : 1 + i % 7;

		assert_int_equal(
			zf_image_writer_append(w, pages + i * ZF_PAGE_SIZE, run * ZF_PAGE_SIZE), 0);
		i += run;
	}
	assert_int_equal(zf_image_writer_finish(w, 1), 0);
}

static void check_image(const char *path, const uint8_t *pages, size_t n)
{
	zf_image *img = NULL;

	assert_int_equal(zf_image_open(path, 0, &img), 0);
	assert_int_equal(zf_image_size(img), n * ZF_PAGE_SIZE);
	assert_memory_equal(zf_image_data(img), pages, n * ZF_PAGE_SIZE);
	assert_int_equal((uintptr_t)zf_image_data(img) % ZF_PAGE_SIZE, 0);
	zf_image_close(img);
}

static void test_write_read_raw_and_zstd(void **state)
{
	uint8_t *pages = make_pages(PAGES);
	struct stat st;

	(void)state;
	umask(022);
	write_image(path_in_dir("raw.bin"), pages, PAGES, 0);
	assert_int_equal(stat(path_in_dir("raw.bin"), &st), 0);
	assert_int_equal(st.st_size, PAGES * ZF_PAGE_SIZE);
	assert_int_equal(st.st_mode & 0777, 0666 & ~022); /* as creat() would, not 0600 */
	check_image(path_in_dir("raw.bin"), pages, PAGES);

#if ZF_IMAGE_ZSTD
	/* The format is told by the magic number, not the name. */
	write_image(path_in_dir("compressed.img"), pages, PAGES, 3);
	assert_int_equal(stat(path_in_dir("compressed.img"), &st), 0);
	assert_true(st.st_size < PAGES * ZF_PAGE_SIZE);
	check_image(path_in_dir("compressed.img"), pages, PAGES);
	assert_int_equal(count_entries(), 2); /* no temporary files left */
#else
	assert_int_equal(count_entries(), 1); /* no temporary file left */
#endif
	free(pages);
}

static void test_from_memory(void **state)
{
	uint8_t *pages = make_pages(8);
	zf_image *img = NULL;
	void *aligned = NULL;

	(void)state;
	assert_int_equal(zf_image_from_memory(pages, 8 * ZF_PAGE_SIZE, 1, "copy", &img), 0);
	assert_memory_equal(zf_image_data(img), pages, 8 * ZF_PAGE_SIZE);
	assert_string_equal(zf_image_name(img), "copy");
	zf_image_close(img);

	assert_int_equal(posix_memalign(&aligned, ZF_PAGE_SIZE, 8 * ZF_PAGE_SIZE), 0);
	memcpy(aligned, pages, 8 * ZF_PAGE_SIZE);
	assert_int_equal(zf_image_from_memory(aligned, 8 * ZF_PAGE_SIZE, 0, "borrowed", &img), 0);
	assert_ptr_equal(zf_image_data(img), aligned);
	zf_image_close(img);
	/* Borrowed images must be aligned whole pages. */
	assert_int_equal(zf_image_from_memory((uint8_t *)aligned + 8, ZF_PAGE_SIZE, 0, "x", &img),
			 -EINVAL);
	assert_int_equal(zf_image_from_memory(aligned, 100, 1, "x", &img), -EINVAL);
	assert_int_equal(zf_image_from_memory(aligned, 0, 1, "x", &img), -EINVAL);
	free(aligned);
	free(pages);
	zf_image_close(NULL);
}

static void test_rejects(void **state)
{
	uint8_t *pages = make_pages(16);
	zf_image *img = NULL;
	uint8_t *zst;
	long zst_len;
	FILE *f;

	(void)state;
	assert_int_equal(zf_image_open(path_in_dir("missing"), 0, &img), -ENOENT);
	write_file(path_in_dir("empty"), pages, 0);
	assert_int_equal(zf_image_open(path_in_dir("empty"), 0, &img), -EINVAL);
	write_file(path_in_dir("partial"), pages, ZF_PAGE_SIZE + 10);
	assert_int_equal(zf_image_open(path_in_dir("partial"), 0, &img), -EINVAL);
	write_file(path_in_dir("big"), pages, 16 * ZF_PAGE_SIZE);
	assert_int_equal(zf_image_open(path_in_dir("big"), 8 * ZF_PAGE_SIZE, &img), -EFBIG);
	assert_int_equal(zf_image_open(path_in_dir("big"), 16 * ZF_PAGE_SIZE, &img), 0);
	zf_image_close(img);
	assert_int_equal(zf_image_open(dir, 0, &img), -EISDIR);

#if ZF_IMAGE_ZSTD
	/* A zstd stream cut short, and one with a damaged block. */
	write_image(path_in_dir("ok.zst"), pages, 16, 1);
	f = fopen(path_in_dir("ok.zst"), "rb");
	assert_non_null(f);
	zst = malloc(1 << 20);
	zst_len = (long)fread(zst, 1, 1 << 20, f);
	fclose(f);
	assert_true(zst_len > 20);
	write_file(path_in_dir("cut.zst"), zst, (size_t)zst_len - 7);
	assert_int_equal(zf_image_open(path_in_dir("cut.zst"), 0, &img), -EBADMSG);
	for (long i = 12; i < zst_len; i += 3)
		zst[i] ^= 0x5a;
	write_file(path_in_dir("bad.zst"), zst, (size_t)zst_len);
	assert_int_equal(zf_image_open(path_in_dir("bad.zst"), 0, &img), -EBADMSG);
	free(zst);
#else
	/* Without zstd, a zstd stream is recognised and refused, in a file or in memory. */
	memcpy(pages, "\x28\xb5\x2f\xfd", 4);
	write_file(path_in_dir("x.zst"), pages, 16 * ZF_PAGE_SIZE);
	assert_int_equal(zf_image_open(path_in_dir("x.zst"), 0, &img), -ENOTSUP);
	assert_int_equal(zf_image_from_memory(pages, 16 * ZF_PAGE_SIZE, 1, "x", &img), -ENOTSUP);
	(void)zst;
	(void)zst_len;
	(void)f;
#endif
	free(pages);
}

static void test_writer_failures(void **state)
{
	zf_image_writer *w = NULL;
	uint8_t page[ZF_PAGE_SIZE] = { 1 };
	const int before = count_entries();

	(void)state;
	assert_int_equal(zf_image_writer_open("/nonexistent-dir/x.bin", 0, &w), -ENOENT);
	assert_int_equal(zf_image_writer_open("", 0, &w), -EINVAL);
#if ZF_IMAGE_ZSTD
	assert_int_equal(zf_image_writer_open(path_in_dir("x.zst"), 99, &w), -EINVAL);
#else
	assert_int_equal(zf_image_writer_open(path_in_dir("x.zst"), 1, &w), -ENOTSUP);
#endif
	assert_int_equal(count_entries(), before);

	assert_int_equal(zf_image_writer_open(path_in_dir("discarded"), 0, &w), 0);
	assert_int_equal(zf_image_writer_append(w, page, 100), -EINVAL);
	assert_int_equal(zf_image_writer_append(w, page, sizeof(page)), 0);
	assert_int_equal(zf_image_writer_finish(w, 0), 0);
	assert_int_equal(count_entries(), before);
}

static void test_same_filled(void **state)
{
	uint64_t page[ZF_PAGE_SIZE / 8], v = 0;

	(void)state;
	memset(page, 0, sizeof(page));
	assert_true(zf_same_filled(page, sizeof(page), &v));
	assert_int_equal(v, 0);
	for (size_t i = 0; i < ZF_PAGE_SIZE / 8; i++)
		page[i] = 0xdeadbeefcafef00dULL;
	assert_true(zf_same_filled(page, sizeof(page), &v));
	assert_int_equal(v, 0xdeadbeefcafef00dULL);
	/* Any single word different, first, middle or last. */
	for (size_t i = 0; i < ZF_PAGE_SIZE / 8; i += 255) {
		page[i] ^= 1;
		assert_false(zf_same_filled(page, sizeof(page), NULL));
		page[i] ^= 1;
	}
	page[ZF_PAGE_SIZE / 8 - 1] ^= 1ULL << 63;
	assert_false(zf_same_filled(page, sizeof(page), NULL));
	assert_false(zf_same_filled(page, 0, NULL));
}

static void test_errors_and_version(void **state)
{
	(void)state;
	assert_int_equal(zf_version_number(), ZF_VERSION_NUMBER);
	assert_non_null(strstr(zf_strerror(-E2BIG), "compress"));
	assert_non_null(strstr(zf_strerror(-EBADMSG), "corrupt"));
	assert_non_null(zf_strerror(-ENOENT));
	assert_non_null(zf_strerror(5));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_read_raw_and_zstd),
		cmocka_unit_test(test_from_memory),
		cmocka_unit_test(test_rejects),
		cmocka_unit_test(test_writer_failures),
		cmocka_unit_test(test_same_filled),
		cmocka_unit_test(test_errors_and_version),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
