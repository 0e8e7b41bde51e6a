/*
 * codec.c - codec names, interning, and the checked entry points.
 *
 * zf_codec_find("zstd:3") parses the name once and returns an interned descriptor, so a
 * store can keep a pointer per entry and compare codecs by pointer. The intern list only
 * grows (a program names a handful of codecs) and is freed at exit so that leak checkers
 * stay quiet. The entry points check lengths here, once, so each backend can trust them.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"

static const struct codec_ops *const backends[] = {
#ifdef ZF_WITH_LZ4
	&codec_lz4_ops,	    &codec_lz4hc_ops,
#endif
#ifdef ZF_WITH_ZSTD
	&codec_zstd_ops,
#endif
#ifdef ZF_WITH_DEFLATE
	&codec_deflate_ops,
#endif
#ifdef ZF_WITH_ISAL
	&codec_isal_ops,
#endif
#ifdef ZF_WITH_LZO
	&codec_lzo_ops,
#endif
	&codec_none_ops,
};

/* Every algorithm zfolio knows, built in or not, so that a missing one says -ENOTSUP. */
static const char *const known_algorithms[] = { "lz4",	"lz4hc", "zstd", "deflate",
						"isal", "lzo",	 "none" };

static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zf_codec *interned;

static int parse_level(const char *s, int *level)
{
	char *end;
	long v;

	/* Digits with an optional minus: no blanks, no plus, nothing after. */
	if (!(*s >= '0' && *s <= '9') && !(*s == '-' && s[1] >= '0' && s[1] <= '9'))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end != '\0' || v < INT_MIN || v > INT_MAX)
		return -EINVAL;
	*level = (int)v;
	return 0;
}

static const struct codec_ops *find_backend(const char *alg, size_t alg_len)
{
	for (size_t i = 0; i < ZF_ARRAY_SIZE(backends); i++) {
		if (strlen(backends[i]->algorithm) == alg_len &&
		    memcmp(backends[i]->algorithm, alg, alg_len) == 0)
			return backends[i];
	}
	return NULL;
}

static int is_known(const char *alg, size_t alg_len)
{
	for (size_t i = 0; i < ZF_ARRAY_SIZE(known_algorithms); i++) {
		if (strlen(known_algorithms[i]) == alg_len &&
		    memcmp(known_algorithms[i], alg, alg_len) == 0)
			return 1;
	}
	return 0;
}

int zf_codec_find(const char *name, const zf_codec **codec)
{
	const struct codec_ops *ops;
	const char *colon;
	struct zf_codec *c;
	size_t alg_len;
	int level;

	RETURN_IF(!name || !codec, -EINVAL);
	colon = strchr(name, ':');
	alg_len = colon ? (size_t)(colon - name) : strlen(name);
	ops = find_backend(name, alg_len);
	if (!ops)
		return is_known(name, alg_len) ? -ENOTSUP : -ENOENT;

	level = ops->level_default;
	if (colon) {
		RETURN_IF(!ops->has_level, -EINVAL);
		TRY(parse_level(colon + 1, &level));
		RETURN_IF(level < ops->level_min || level > ops->level_max, -EINVAL);
	}

	pthread_mutex_lock(&intern_lock);
	for (c = interned; c; c = c->next) {
		if (c->ops == ops && c->level == level)
			break;
	}
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (c) {
			c->ops = ops;
			c->level = level;
			if (ops->has_level)
				snprintf(c->name, sizeof(c->name), "%s:%d", ops->algorithm, level);
			else
				snprintf(c->name, sizeof(c->name), "%s", ops->algorithm);
			c->next = interned;
			interned = c;
		}
	}
	pthread_mutex_unlock(&intern_lock);
	RETURN_IF(!c, -ENOMEM);
	*codec = c;
	return 0;
}

/*
 * The interned codecs live as long as the process: no destructor frees them at exit, as
 * threads still running then (engines, a region's service and reclaim threads, when the
 * program calls exit() with them busy) keep using them. They stay reachable from
 * interned, so leak checkers do not count them.
 */

const char *zf_codec_name(const zf_codec *codec)
{
	return codec->name;
}

const char *zf_codec_algorithm(const zf_codec *codec)
{
	return codec->ops->algorithm;
}

int zf_codec_level(const zf_codec *codec)
{
	return codec->ops->has_level ? codec->level : 0;
}

static char algorithm_list[128];

static void build_algorithm_list(void)
{
	size_t off = 0;

	for (size_t i = 0; i < ZF_ARRAY_SIZE(backends); i++) {
		int n = snprintf(algorithm_list + off, sizeof(algorithm_list) - off, "%s%s",
				 i ? " " : "", backends[i]->algorithm);

		if (n < 0 || (size_t)n >= sizeof(algorithm_list) - off)
			break;
		off += (size_t)n;
	}
}

const char *zf_codec_algorithms(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, build_algorithm_list);
	return algorithm_list;
}

int zf_codec_ctx_create(const zf_codec *codec, zf_codec_ctx **ctxp)
{
	zf_codec_ctx *ctx;
	int ret;

	RETURN_IF(!codec || !ctxp, -EINVAL);
	ctx = calloc(1, sizeof(*ctx));
	RETURN_IF(!ctx, -ENOMEM);
	ctx->codec = codec;
	ctx->level = codec->level;
	ret = codec->ops->init ? codec->ops->init(ctx) : 0;
	if (ret < 0) {
		free(ctx);
		return ret;
	}
	*ctxp = ctx;
	return 0;
}

void zf_codec_ctx_destroy(zf_codec_ctx *ctx)
{
	if (!ctx)
		return;
	if (ctx->codec->ops->fini)
		ctx->codec->ops->fini(ctx);
	free(ctx);
}

const zf_codec *zf_codec_ctx_codec(const zf_codec_ctx *ctx)
{
	return ctx->codec;
}

int zf_codec_compress(zf_codec_ctx *ctx, const void *src, size_t src_len, void *dst, size_t dst_cap)
{
	RETURN_IF(src_len == 0 || src_len > ZF_UNIT_MAX, -EINVAL);
	RETURN_IF(dst_cap == 0, -E2BIG);
	/* Every backend takes int lengths; a bound above INT_MAX is as good as INT_MAX. */
	if (dst_cap > INT_MAX)
		dst_cap = INT_MAX;
	return ctx->codec->ops->compress(ctx, src, (int)src_len, dst, (int)dst_cap);
}

int zf_codec_decompress(zf_codec_ctx *ctx, const void *src, size_t src_len, void *dst,
			size_t dst_len)
{
	RETURN_IF(dst_len == 0 || dst_len > ZF_UNIT_MAX, -EINVAL);
	/* No backend's output for a unit comes near INT_MAX: such input is corrupt. */
	RETURN_IF(src_len == 0 || src_len > INT_MAX, -EBADMSG);
	return ctx->codec->ops->decompress(ctx, src, (int)src_len, dst, (int)dst_len);
}
