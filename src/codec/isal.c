/*
 * isal.c - raw DEFLATE by ISA-L's igzip, levels 0..3.
 *
 * igzip is the software twin of Intel IAA's deflate engine: the same format, the same
 * small set of levels, and a stateless one-shot API that suits whole units. The stream
 * and inflate states are large structures, so each context keeps one of each plus the
 * level buffer, sized once for the level; a call only resets them. A stateless deflate
 * that runs out of output space reports STATELESS_OVERFLOW (-E2BIG here); the inflater
 * must end exactly at the end of the input with exactly the expected output.
 */
#include <stdlib.h>

#include <isa-l/igzip_lib.h>

#include "codec.h"

struct isal_priv {
	struct isal_zstream stream;
	struct inflate_state inflate;
	uint32_t level_buf_size;
	uint8_t level_buf[];
};

static uint32_t isal_level_buf_size(int level)
{
	switch (level) {
	case 1:
		return ISAL_DEF_LVL1_DEFAULT;
	case 2:
		return ISAL_DEF_LVL2_DEFAULT;
	case 3:
		return ISAL_DEF_LVL3_DEFAULT;
	default:
		return 0;
	}
}

static int isal_init(struct zf_codec_ctx *ctx)
{
	const uint32_t size = isal_level_buf_size(ctx->level);
	/* Zeroed: igzip reads hash slots before it writes them (valgrind says so, rightly). */
	struct isal_priv *p = calloc(1, sizeof(*p) + size);

	RETURN_IF(!p, -ENOMEM);
	p->level_buf_size = size;
	ctx->priv = p;
	return 0;
}

static void isal_fini(struct zf_codec_ctx *ctx)
{
	free(ctx->priv);
}

static int isal_compress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			 int dst_cap)
{
	struct isal_priv *p = ctx->priv;
	struct isal_zstream *s = &p->stream;
	int ret;

	isal_deflate_stateless_init(s);
	s->level = (uint32_t)ctx->level;
	s->level_buf = p->level_buf_size ? p->level_buf : NULL;
	s->level_buf_size = p->level_buf_size;
	s->gzip_flag = IGZIP_DEFLATE;
	s->flush = NO_FLUSH;
	s->end_of_stream = 1;
	s->next_in = (uint8_t *)(uintptr_t)src; /* igzip never writes its input */
	s->avail_in = (uint32_t)src_len;
	s->next_out = dst;
	s->avail_out = (uint32_t)dst_cap;

	ret = isal_deflate_stateless(s);
	if (ret == COMP_OK)
		return (int)s->total_out;
	return ret == STATELESS_OVERFLOW ? -E2BIG : -EINVAL;
}

static int isal_decompress(struct zf_codec_ctx *ctx, const void *src, int src_len, void *dst,
			   int dst_len)
{
	struct isal_priv *p = ctx->priv;
	struct inflate_state *s = &p->inflate;
	int ret;

	isal_inflate_init(s);
	s->crc_flag = ISAL_DEFLATE;
	s->next_in = (uint8_t *)(uintptr_t)src;
	s->avail_in = (uint32_t)src_len;
	s->next_out = dst;
	s->avail_out = (uint32_t)dst_len;

	ret = isal_inflate_stateless(s);
	if (ret == ISAL_DECOMP_OK && s->total_out == (uint32_t)dst_len && s->avail_in == 0)
		return dst_len;
	return -EBADMSG;
}

const struct codec_ops codec_isal_ops = {
	.algorithm = "isal",
	.has_level = 1,
	.level_min = 0,
	.level_max = ISAL_DEF_MAX_LEVEL,
	.level_default = 1,
	.init = isal_init,
	.fini = isal_fini,
	.compress = isal_compress,
	.decompress = isal_decompress,
};
