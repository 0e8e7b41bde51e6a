/*
 * codec.h - the vtable behind zf_codec, and what a backend file provides.
 *
 * A backend is one file (lz4.c, zstd.c, ...) that wraps one Debian library and maps its
 * results to zfolio's codes in one place: -E2BIG when the output would not fit in the
 * caller's bound, -EBADMSG for anything wrong with compressed input. The dispatcher in
 * codec.c has already checked the lengths (1..ZF_UNIT_MAX, both fitting in an int), so
 * a backend only handles what its library can report.
 *
 * Per-thread state lives in zf_codec_ctx->priv, made by init() and freed by fini();
 * backends keep their library's contexts there so that nothing is allocated per call.
 */
#ifndef ZF_CODEC_H
#define ZF_CODEC_H

#include "../common/common.h"

struct zf_codec_ctx;

struct codec_ops {
	const char *algorithm;
	int has_level; /* 0: the name takes no ":L" */
	int level_min, level_max, level_default;
	int (*init)(struct zf_codec_ctx *ctx);
	void (*fini)(struct zf_codec_ctx *ctx);
	int (*compress)(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			int dst_cap);
	int (*decompress)(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			  int dst_len);
};

struct zf_codec {
	const struct codec_ops *ops;
	int level;
	char name[32];
	struct zf_codec *next; /* the intern list */
};

struct zf_codec_ctx {
	const struct zf_codec *codec;
	int level;
	void *priv;
};

extern const struct codec_ops codec_lz4_ops;
extern const struct codec_ops codec_lz4hc_ops;
extern const struct codec_ops codec_zstd_ops;
extern const struct codec_ops codec_deflate_ops;
extern const struct codec_ops codec_isal_ops;
extern const struct codec_ops codec_lzo_ops;
extern const struct codec_ops codec_none_ops;

#endif /* ZF_CODEC_H */
