/*
 * ClientHello parsing (RFC 8446 4.1.2, RFC 6066 3). Every length is
 * checked against what encloses it; anything inconsistent is GW_SNI_BAD,
 * which the proxy treats as "not a hello it can decide on" (refused in
 * allowlist mode).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/gw_sni.h"

#define TLS_REC_HANDSHAKE	22
#define TLS_REC_HDR		5
#define TLS_REC_MAX		(16384 + 256)	/* plaintext limit, with slack for old stacks */
#define TLS_HS_CLIENT_HELLO	1
#define TLS_EXT_SERVER_NAME	0
#define TLS_SNI_HOST_NAME	0

/* A bounded reader over a byte range. */
struct rd {
	const uint8_t	*p;
	size_t		 left;
};

static int
rd_u8(struct rd *r, size_t *v)
{
	if (r->left < 1)
		return -1;
	*v = r->p[0];
	r->p++;
	r->left--;
	return 0;
}

static int
rd_u16(struct rd *r, size_t *v)
{
	if (r->left < 2)
		return -1;
	*v = (size_t)r->p[0] << 8 | r->p[1];
	r->p += 2;
	r->left -= 2;
	return 0;
}

static int
rd_skip(struct rd *r, size_t n)
{
	if (r->left < n)
		return -1;
	r->p += n;
	r->left -= n;
	return 0;
}

/* Split off the next n bytes as a sub-reader. */
static int
rd_sub(struct rd *r, size_t n, struct rd *sub)
{
	if (r->left < n)
		return -1;
	sub->p = r->p;
	sub->left = n;
	r->p += n;
	r->left -= n;
	return 0;
}

/* The server_name extension body: one host_name entry. */
static enum gw_sni_result
parse_server_name(struct rd *ext, char *name, size_t namelen)
{
	struct rd list;
	size_t listlen, type, n, i;
	int found = 0;

	if (rd_u16(ext, &listlen) == -1 || rd_sub(ext, listlen, &list) == -1 ||
	    ext->left != 0 || listlen == 0)
		return GW_SNI_BAD;
	while (list.left > 0) {
		if (rd_u8(&list, &type) == -1 || rd_u16(&list, &n) == -1 || list.left < n)
			return GW_SNI_BAD;
		if (type != TLS_SNI_HOST_NAME) {
			(void)rd_skip(&list, n);
			continue;
		}
		/* RFC 6066: at most one name of each type. */
		if (found || n == 0 || n > GW_SNI_NAME_MAX || n >= namelen)
			return GW_SNI_BAD;
		for (i = 0; i < n; i++)
			if (list.p[i] <= 0x20 || list.p[i] >= 0x7f)
				return GW_SNI_BAD;
		memcpy(name, list.p, n);
		name[n] = '\0';
		(void)rd_skip(&list, n);
		found = 1;
	}
	return found ? GW_SNI_FOUND : GW_SNI_NONE;
}

/* The ClientHello body (after the 4-byte handshake header). */
static enum gw_sni_result
parse_hello(const uint8_t *p, size_t len, char *name, size_t namelen)
{
	struct rd r = { p, len }, exts, ext;
	size_t n, type, seen_sni = 0;
	enum gw_sni_result res = GW_SNI_NONE;

	/* legacy_version, random, session id, cipher suites, compression. */
	if (rd_skip(&r, 2 + 32) == -1)
		return GW_SNI_BAD;
	if (rd_u8(&r, &n) == -1 || n > 32 || rd_skip(&r, n) == -1)
		return GW_SNI_BAD;
	if (rd_u16(&r, &n) == -1 || n < 2 || n % 2 != 0 || rd_skip(&r, n) == -1)
		return GW_SNI_BAD;
	if (rd_u8(&r, &n) == -1 || n < 1 || rd_skip(&r, n) == -1)
		return GW_SNI_BAD;
	if (r.left == 0)
		return GW_SNI_NONE;	/* no extensions at all */
	if (rd_u16(&r, &n) == -1 || rd_sub(&r, n, &exts) == -1 || r.left != 0)
		return GW_SNI_BAD;
	while (exts.left > 0) {
		if (rd_u16(&exts, &type) == -1 || rd_u16(&exts, &n) == -1 ||
		    rd_sub(&exts, n, &ext) == -1)
			return GW_SNI_BAD;
		if (type != TLS_EXT_SERVER_NAME)
			continue;
		/* A second server_name would let two parsers pick different ones. */
		if (seen_sni++)
			return GW_SNI_BAD;
		if ((res = parse_server_name(&ext, name, namelen)) == GW_SNI_BAD)
			return GW_SNI_BAD;
	}
	return res;
}

enum gw_sni_result
gw_sni_parse(const uint8_t *buf, size_t len, char *name, size_t namelen)
{
	uint8_t hs[4 + GW_SNI_HELLO_MAX];
	size_t hslen = 0, off = 0, reclen, msglen;

	if (namelen > 0)
		name[0] = '\0';
	if (len == 0)
		return GW_SNI_MORE;
	if (buf[0] != TLS_REC_HANDSHAKE)
		return GW_SNI_NOT_TLS;
	if (len >= 2 && buf[1] != 3)
		return GW_SNI_NOT_TLS;
	/* Gather the handshake bytes of as many complete records as needed. */
	for (;;) {
		if (len - off < TLS_REC_HDR)
			return GW_SNI_MORE;
		if (buf[off] != TLS_REC_HANDSHAKE || buf[off + 1] != 3)
			return GW_SNI_BAD;	/* something else interleaved in the hello */
		reclen = (size_t)buf[off + 3] << 8 | buf[off + 4];
		if (reclen == 0 || reclen > TLS_REC_MAX)
			return GW_SNI_BAD;
		if (len - off - TLS_REC_HDR < reclen)
			return GW_SNI_MORE;
		if (hslen + reclen > sizeof(hs))
			return GW_SNI_BAD;
		memcpy(hs + hslen, buf + off + TLS_REC_HDR, reclen);
		hslen += reclen;
		off += TLS_REC_HDR + reclen;
		if (hslen < 4)
			continue;
		if (hs[0] != TLS_HS_CLIENT_HELLO)
			return GW_SNI_BAD;
		msglen = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
		if (msglen > GW_SNI_HELLO_MAX)
			return GW_SNI_BAD;
		if (hslen >= 4 + msglen)
			break;
	}
	/* Bytes past the hello in its last record are not ours to judge. */
	return parse_hello(hs + 4, msglen, name, namelen);
}
