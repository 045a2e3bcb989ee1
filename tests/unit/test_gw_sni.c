/* gw_sni: ClientHello server_name extraction on real and hand-built hellos. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gateway/gw_sni.h"
#include "gw_testca.h"
#include "t.h"

static char name[GW_SNI_NAME_MAX + 1];

/* A minimal ClientHello record around the given extensions block. */
static size_t
build_hello(const uint8_t *exts, size_t extlen, int with_exts, uint8_t *out)
{
	uint8_t body[4096];
	size_t n = 0, i;

	body[n++] = 3;
	body[n++] = 3;
	for (i = 0; i < 32; i++)
		body[n++] = (uint8_t)i;
	body[n++] = 0;			/* session id */
	body[n++] = 0;
	body[n++] = 2;
	body[n++] = 0x13;
	body[n++] = 0x01;		/* TLS_AES_128_GCM_SHA256 */
	body[n++] = 1;
	body[n++] = 0;			/* null compression */
	if (with_exts) {
		body[n++] = (uint8_t)(extlen >> 8);
		body[n++] = (uint8_t)extlen;
		memcpy(body + n, exts, extlen);
		n += extlen;
	}
	out[0] = 22;
	out[1] = 3;
	out[2] = 1;
	out[3] = (uint8_t)((n + 4) >> 8);
	out[4] = (uint8_t)(n + 4);
	out[5] = 1;
	out[6] = 0;
	out[7] = (uint8_t)(n >> 8);
	out[8] = (uint8_t)n;
	memcpy(out + 9, body, n);
	return n + 9;
}

/* server_name extension with one entry of the given type and name. */
static size_t
sni_ext(uint8_t *p, int type, const char *host)
{
	size_t hl = strlen(host);

	p[0] = 0;
	p[1] = 0;
	p[2] = (uint8_t)((hl + 5) >> 8);
	p[3] = (uint8_t)(hl + 5);
	p[4] = (uint8_t)((hl + 3) >> 8);
	p[5] = (uint8_t)(hl + 3);
	p[6] = (uint8_t)type;
	p[7] = (uint8_t)(hl >> 8);
	p[8] = (uint8_t)hl;
	memcpy(p + 9, host, hl);
	return 9 + hl;
}

static void
test_real_hello(void)
{
	unsigned char hello[4096];
	size_t n = tca_client_hello("API.Example.com", hello, sizeof(hello)), i;
	int more = 1;

	CHECK(n > 100);
	CHECK(gw_sni_parse(hello, n, name, sizeof(name)) == GW_SNI_FOUND);
	CHECK_STR(name, "API.Example.com");
	/* Every prefix is "need more", never a wrong answer. */
	for (i = 0; i < n; i++)
		if (gw_sni_parse(hello, i, name, sizeof(name)) != GW_SNI_MORE)
			more = 0;
	CHECK(more);
	/* Bytes after the hello (e.g. early data) do not matter. */
	memcpy(hello + n, "\x17\x03\x03\x00\x01x", 6);
	CHECK(gw_sni_parse(hello, n + 6, name, sizeof(name)) == GW_SNI_FOUND);

	n = tca_client_hello(NULL, hello, sizeof(hello));
	CHECK(gw_sni_parse(hello, n, name, sizeof(name)) == GW_SNI_NONE);
	CHECK_STR(name, "");
}

/* The same hello split over three handshake records. */
static void
test_fragmented(void)
{
	unsigned char hello[4096], frag[4200];
	size_t n = tca_client_hello("frag.example.org", hello, sizeof(hello));
	size_t body = n - 5, cuts[3] = { 3, 100, 0 }, off = 5, o = 0, i, k;

	cuts[2] = body - cuts[0] - cuts[1];
	for (k = 0; k < 3; k++) {
		frag[o++] = 22;
		frag[o++] = 3;
		frag[o++] = 1;
		frag[o++] = (uint8_t)(cuts[k] >> 8);
		frag[o++] = (uint8_t)cuts[k];
		memcpy(frag + o, hello + off, cuts[k]);
		o += cuts[k];
		off += cuts[k];
	}
	CHECK(gw_sni_parse(frag, o, name, sizeof(name)) == GW_SNI_FOUND);
	CHECK_STR(name, "frag.example.org");
	for (i = 0; i < o; i++)
		if (gw_sni_parse(frag, i, name, sizeof(name)) != GW_SNI_MORE)
			break;
	CHECK(i == o);

	/* An alert record between the fragments is not a hello. */
	frag[5 + 3] = 21;
	CHECK(gw_sni_parse(frag, o, name, sizeof(name)) == GW_SNI_BAD);
}

static void
test_not_tls(void)
{
	CHECK(gw_sni_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name, sizeof(name)) ==
	    GW_SNI_NOT_TLS);
	CHECK(gw_sni_parse((const uint8_t *)"\x16\x01", 2, name, sizeof(name)) ==
	    GW_SNI_NOT_TLS);
	CHECK(gw_sni_parse((const uint8_t *)"SSH-2.0-x\r\n", 11, name, sizeof(name)) ==
	    GW_SNI_NOT_TLS);
	/* SSLv2-style hello: not something we decide on. */
	CHECK(gw_sni_parse((const uint8_t *)"\x80\x2e\x01\x00\x02", 5, name, sizeof(name)) ==
	    GW_SNI_NOT_TLS);
	CHECK(gw_sni_parse((const uint8_t *)"\x16", 1, name, sizeof(name)) == GW_SNI_MORE);
	CHECK(gw_sni_parse((const uint8_t *)"", 0, name, sizeof(name)) == GW_SNI_MORE);
}

static void
test_built(void)
{
	uint8_t ext[1024], rec[4096];
	size_t e, n;

	e = sni_ext(ext, 0, "a.example");
	n = build_hello(ext, e, 1, rec);
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_FOUND);
	CHECK_STR(name, "a.example");

	/* No extensions block at all. */
	n = build_hello(NULL, 0, 0, rec);
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_NONE);

	/* Two server_name extensions: two parsers could pick different ones. */
	e = sni_ext(ext, 0, "a.example");
	e += sni_ext(ext + e, 0, "evil.example");
	n = build_hello(ext, e, 1, rec);
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_BAD);

	/* Two host_name entries in one list. */
	e = sni_ext(ext, 0, "a.example");
	memcpy(ext + e, "\x00\x00\x01z", 4);
	ext[3] += 4;
	ext[5] += 4;
	e += 4;
	n = build_hello(ext, e, 1, rec);
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_BAD);

	/* A name type other than host_name is skipped. */
	e = sni_ext(ext, 7, "whatever");
	n = build_hello(ext, e, 1, rec);
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_NONE);

	/* Control characters or spaces in the name. */
	e = sni_ext(ext, 0, "a b.example");
	n = build_hello(ext, e, 1, rec);
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_BAD);
	e = sni_ext(ext, 0, "a.example");
	ext[9] = 0;
	n = build_hello(ext, e, 1, rec);
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_BAD);

	/* Extension length running past the block. */
	e = sni_ext(ext, 0, "a.example");
	ext[3]++;
	n = build_hello(ext, e, 1, rec);
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_BAD);

	/* Not a ClientHello. */
	e = sni_ext(ext, 0, "a.example");
	n = build_hello(ext, e, 1, rec);
	rec[5] = 2;
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_BAD);

	/* Handshake length claiming more than the cap. */
	n = build_hello(ext, e, 1, rec);
	rec[6] = 1;
	CHECK(gw_sni_parse(rec, n, name, sizeof(name)) == GW_SNI_BAD);

	/* Zero-length record. */
	memcpy(rec, "\x16\x03\x01\x00\x00", 5);
	CHECK(gw_sni_parse(rec, 5, name, sizeof(name)) == GW_SNI_BAD);

	/* A name longer than the caller's buffer. */
	e = sni_ext(ext, 0, "a.example");
	n = build_hello(ext, e, 1, rec);
	CHECK(gw_sni_parse(rec, n, name, 5) == GW_SNI_BAD);
}

int
main(void)
{
	T_RUN(test_real_hello);
	T_RUN(test_fragmented);
	T_RUN(test_not_tls);
	T_RUN(test_built);
	return t_done();
}
