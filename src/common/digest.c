/*
 * SHA-256 digests for host code, on OpenSSL. Apart from util.c so that the
 * core (log, util, time, base64) links without a crypto library: the static
 * guest agent links it (the agent has its own small SHA-256 for signed URLs).
 */
#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/digest.h"
#include "common/log.h"
#include "common/util.h"

static void
hex_encode(const unsigned char *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 0xf];
	}
	out[2 * len] = '\0';
}

void
sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = sizeof(md);

	if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1)
		fatalx("sha256 failed");
	hex_encode(md, 32, out);
}

int
sha256_file_hex(const char *path, char out[65], char **cause)
{
	unsigned char md[32], buf[65536];
	unsigned int mdlen = sizeof(md);
	EVP_MD_CTX *ctx;
	ssize_t n;
	int fd, rc = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "open %s: %s", path, strerror(errno));
		return -1;
	}
	if ((ctx = EVP_MD_CTX_new()) == NULL)
		fatalx("EVP_MD_CTX_new");
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		fatalx("sha256 init");
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n == -1) {
			if (errno == EINTR)
				continue;
			cause_set(cause, "read %s: %s", path, strerror(errno));
			goto out;
		}
		EVP_DigestUpdate(ctx, buf, (size_t)n);
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	hex_encode(md, 32, out);
	rc = 0;
out:
	EVP_MD_CTX_free(ctx);
	close(fd);
	return rc;
}

/* Incremental: for bodies hashed as they stream in (no second pass on the loop). */
struct sha256_stream {
	EVP_MD_CTX	*ctx;
};

struct sha256_stream *
sha256_stream_new(void)
{
	struct sha256_stream *s = xcalloc(1, sizeof(*s));

	if ((s->ctx = EVP_MD_CTX_new()) == NULL || EVP_DigestInit_ex(s->ctx, EVP_sha256(),
	    NULL) != 1)
		fatalx("sha256: OpenSSL could not start a digest");
	return s;
}

void
sha256_stream_update(struct sha256_stream *s, const void *data, size_t len)
{
	if (EVP_DigestUpdate(s->ctx, data, len) != 1)
		fatalx("sha256: OpenSSL digest update failed");
}

void
sha256_stream_end(struct sha256_stream *s, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	if (out != NULL) {
		if (EVP_DigestFinal_ex(s->ctx, md, &n) != 1)
			fatalx("sha256: OpenSSL digest final failed");
		hex_encode(md, n, out);
	}
	EVP_MD_CTX_free(s->ctx);
	free(s);
}
