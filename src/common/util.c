/* Allocation, cause strings and filesystem helpers. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sys/random.h>

#include "common/log.h"
#include "common/util.h"

void *
xmalloc(size_t size)
{
	void *p;

	if (size == 0)
		size = 1;
	if ((p = malloc(size)) == NULL)
		fatal("xmalloc %zu", size);
	return p;
}

void *
xcalloc(size_t nmemb, size_t size)
{
	void *p;

	if (nmemb == 0 || size == 0)
		nmemb = size = 1;
	if ((p = calloc(nmemb, size)) == NULL)
		fatal("xcalloc %zu*%zu", nmemb, size);
	return p;
}

void *
xreallocarray(void *ptr, size_t nmemb, size_t size)
{
	void *p;

	if (size != 0 && nmemb > SIZE_MAX / size)
		fatalx("xreallocarray: %zu*%zu overflows", nmemb, size);
	if ((p = realloc(ptr, nmemb * size != 0 ? nmemb * size : 1)) == NULL)
		fatal("xreallocarray %zu*%zu", nmemb, size);
	return p;
}

char *
xstrdup(const char *s)
{
	char *p;

	if ((p = strdup(s)) == NULL)
		fatal("xstrdup");
	return p;
}

void *
xnonnull(void *p, const char *what)
{
	if (p == NULL)
		fatalx("%s: out of memory", what);
	return p;
}

int
xvasprintf(char **ret, const char *fmt, va_list ap)
{
	int n;

	if ((n = vasprintf(ret, fmt, ap)) < 0)
		fatal("xvasprintf");
	return n;
}

int
xasprintf(char **ret, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = xvasprintf(ret, fmt, ap);
	va_end(ap);
	return n;
}

void
cause_set(char **cause, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (cause == NULL)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		fatal("cause_set");
	va_end(ap);
	free(*cause);
	*cause = msg;
}

void
cause_wrap(char **cause, const char *fmt, ...)
{
	va_list ap;
	char *ctx, *msg;

	if (cause == NULL)
		return;
	va_start(ap, fmt);
	if (vasprintf(&ctx, fmt, ap) < 0)
		fatal("cause_wrap");
	va_end(ap);
	if (*cause != NULL) {
		xasprintf(&msg, "%s: %s", ctx, *cause);
		free(ctx);
		free(*cause);
		*cause = msg;
	} else
		*cause = ctx;
}

int
mkdir_p(const char *path, mode_t mode, char **cause)
{
	char buf[PATH_MAX];
	char *p;
	size_t len;

	len = strlen(path);
	if (len == 0 || len >= sizeof(buf)) {
		cause_set(cause, "mkdir %s: bad path length", path);
		return -1;
	}
	memcpy(buf, path, len + 1);
	for (p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) == -1 && errno != EEXIST) {
			cause_set(cause, "mkdir %s: %s", buf, strerror(errno));
			return -1;
		}
		*p = '/';
	}
	if (mkdir(buf, mode) == -1 && errno != EEXIST) {
		cause_set(cause, "mkdir %s: %s", buf, strerror(errno));
		return -1;
	}
	return 0;
}

int
read_file(const char *path, size_t maxlen, char **out, size_t *outlen, char **cause)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "open %s: %s", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (len + 1 >= cap) {
			cap = cap ? cap * 2 : 4096;
			buf = xreallocarray(buf, cap, 1);
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			cause_set(cause, "read %s: %s", path, strerror(errno));
			goto bad;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > maxlen) {
			cause_set(cause, "%s: larger than %zu bytes", path, maxlen);
			goto bad;
		}
	}
	close(fd);
	if (buf == NULL)
		buf = xcalloc(1, 1);
	buf[len] = '\0';
	*out = buf;
	if (outlen != NULL)
		*outlen = len;
	return 0;
bad:
	close(fd);
	free(buf);
	return -1;
}

int
write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, char **cause)
{
	char *tmp;
	const char *p = data;
	ssize_t n;
	int fd;

	xasprintf(&tmp, "%s.tmp.%ld", path, (long)getpid());
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) == -1) {
		cause_set(cause, "create %s: %s", tmp, strerror(errno));
		free(tmp);
		return -1;
	}
	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			cause_set(cause, "write %s: %s", tmp, strerror(errno));
			goto bad;
		}
		p += n;
		len -= (size_t)n;
	}
	if (fchmod(fd, mode) == -1 || fsync(fd) == -1) {
		cause_set(cause, "sync %s: %s", tmp, strerror(errno));
		goto bad;
	}
	if (close(fd) == -1) {
		fd = -1;
		cause_set(cause, "close %s: %s", tmp, strerror(errno));
		goto bad;
	}
	fd = -1;
	if (rename(tmp, path) == -1) {
		cause_set(cause, "rename %s: %s", path, strerror(errno));
		goto bad;
	}
	free(tmp);
	return 0;
bad:
	if (fd != -1)
		close(fd);
	unlink(tmp);
	free(tmp);
	return -1;
}

int
path_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static int
remove_tree_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (remove(path) == -1 && errno != ENOENT)
		return errno;
	return 0;
}

int
remove_tree(const char *path, char **cause)
{
	int rc;

	if (!path_exists(path))
		return 0;
	rc = nftw(path, remove_tree_cb, 64, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (rc != 0) {
		cause_set(cause, "remove %s: %s", path, strerror(rc > 0 ? rc : errno));
		return -1;
	}
	return 0;
}

char *
xstrndup(const char *s, size_t n)
{
	const char *nul = memchr(s, '\0', n);
	char *p;

	/*
	 * Not strndup: callers pass slices of bodies that need not end in a
	 * NUL, and ASan's strict_string_checks (make check) flags strndup
	 * reading such a buffer as a string. memchr reads only the n bytes.
	 */
	if (nul != NULL)
		n = (size_t)(nul - s);
	if ((p = malloc(n + 1)) == NULL)
		fatal("xstrndup");
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

int
timingsafe_eq(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char d = 0;
	size_t i;

	for (i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}

void
random_id(char *out, size_t len)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char rnd[64];
	size_t i;

	if (len > sizeof(rnd) || getrandom(rnd, len, 0) != (ssize_t)len)
		fatal("getrandom");
	/* 252 = 7 * 36: redraw above it so every character is equally likely. */
	for (i = 0; i < len; i++) {
		while (rnd[i] >= 252) {
			if (getrandom(&rnd[i], 1, 0) != 1)
				fatal("getrandom");
		}
		out[i] = alphabet[rnd[i] % 36];
	}
	out[len] = '\0';
}

uint64_t
monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

uint64_t
monotonic_ms(void)
{
	return monotonic_ns() / 1000000;
}

double
monotonic_secs(void)
{
	return (double)monotonic_ns() / 1e9;
}

double
monotonic_msf(void)
{
	return (double)monotonic_ns() / 1e6;
}

double
monotonic_ms_since(double t0)
{
	return monotonic_msf() - t0;
}

int
ct_streq(const char *given, const char *secret)
{
	size_t n = strlen(secret);

	/* Only whether the lengths match shows in the time, not where the bytes differ. */
	return strlen(given) == n && timingsafe_eq(given, secret, n);
}

size_t
utf8_seq(const unsigned char *s, size_t len)
{
	size_t n, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len < n)
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, UTF-16 surrogates and code points past U+10FFFF. */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

int
utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, n;

	while (i < len) {
		if ((n = utf8_seq(s + i, len - i)) == 0 || (n == 1 && s[i] == 0))
			return 0;
		i += n;
	}
	return 1;
}

char *
utf8_escape_ext(const char *str, size_t len, size_t max, int flags, size_t *outlen)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, o = 0, n, cap = len * 4 + 1;
	char *out;

	if (max > 0 && cap > max + 1)
		cap = max + 1;
	out = xmalloc(cap);
	while (i < len) {
		char esc[5];
		const char *piece;
		size_t plen;

		if ((flags & UTF8_ESC_CRLF) && s[i] == '\r' && i + 1 < len && s[i + 1] == '\n') {
			i++;		/* the serial line's CR LF is a newline */
			continue;
		}
		n = utf8_seq(s + i, len - i);
		/* C1 controls (U+0080..U+009F) act on terminals too (U+009B is CSI). */
		if ((flags & UTF8_ESC_C1) && n == 2 && s[i] == 0xc2 && s[i + 1] < 0xa0)
			n = 0;
		if (n == 1 && (s[i] == '\\')) {
			piece = "\\\\";
			plen = 2;
		} else if (n == 0 || (n == 1 && ((s[i] < 0x20 && s[i] != '\n' && s[i] != '\t') ||
		    s[i] == 0x7f))) {
			snprintf(esc, sizeof(esc), "\\x%02x", s[i]);
			piece = esc;
			plen = 4;
			n = 1;
		} else {
			piece = (const char *)s + i;
			plen = n;
		}
		if (o + plen >= cap)
			break;
		memcpy(out + o, piece, plen);
		o += plen;
		i += n;
	}
	out[o] = '\0';
	if (outlen != NULL)
		*outlen = o;
	return out;
}

char *
utf8_escape(const char *str, size_t len, size_t max)
{
	return utf8_escape_ext(str, len, max, 0, NULL);
}

int
csv_has(const char *list, const char *word)
{
	size_t n = strlen(word), m;
	const char *p = list;

	while (*p != '\0') {
		m = strcspn(p, ",");
		if (m == n && strncmp(p, word, n) == 0)
			return 1;
		p += m;
		if (*p == ',')
			p++;
	}
	return 0;
}
