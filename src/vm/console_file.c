/* The retained console on disk: two capped generations, read back and escaped. */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "vm/console_file.h"

#define CONSOLE_OPEN_FLAGS	(O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW)

static int
cf_reopen(struct console_file *cf, int truncate)
{
	struct stat st;

	cf->cf_fd = open(cf->cf_path, CONSOLE_OPEN_FLAGS | (truncate ? O_TRUNC : 0), 0600);
	if (cf->cf_fd == -1)
		return -1;
	cf->cf_size = fstat(cf->cf_fd, &st) == 0 ? (size_t)st.st_size : 0;
	return 0;
}

void
console_file_open(struct console_file *cf, const char *path, size_t cap)
{
	memset(cf, 0, sizeof(*cf));
	if (cap < CONSOLE_FILE_MIN)
		cap = CONSOLE_FILE_MIN;
	cf->cf_path = xstrdup(path);
	xasprintf(&cf->cf_old, "%s.1", path);
	cf->cf_genmax = cap / 2;
	cf_reopen(cf, 0);
}

void
console_file_close(struct console_file *cf)
{
	if (cf->cf_fd != -1 && cf->cf_path != NULL)
		close(cf->cf_fd);
	free(cf->cf_path);
	free(cf->cf_old);
	memset(cf, 0, sizeof(*cf));
	cf->cf_fd = -1;
}

/*
 * The current generation becomes the previous one (replacing it) and a new
 * one starts. A failed rename still truncates: the cap holds either way.
 */
static void
cf_rotate(struct console_file *cf)
{
	if (cf->cf_fd != -1)
		close(cf->cf_fd);
	if (rename(cf->cf_path, cf->cf_old) == -1 && errno != ENOENT)
		unlink(cf->cf_old);
	if (cf_reopen(cf, 1) == -1)
		cf->cf_size = 0;
}

/* Bytes written of buf (all of it unless a write failed). */
static size_t
cf_write_all(struct console_file *cf, const char *buf, size_t len)
{
	size_t done = 0;
	ssize_t w;

	while (done < len) {
		w = write(cf->cf_fd, buf + done, len - done);
		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	cf->cf_size += done;
	return done;
}

/* Write with rotation; returns the bytes kept. */
static size_t
cf_put(struct console_file *cf, const char *buf, size_t len)
{
	size_t kept = 0, room, n, w;
	const char *nl;

	while (len > 0) {
		if (cf->cf_fd == -1 && cf_reopen(cf, 0) == -1)
			break;
		room = cf->cf_size < cf->cf_genmax ? cf->cf_genmax - cf->cf_size : 0;
		if (len <= room)
			n = len;
		else if ((nl = memrchr(buf, '\n', room)) != NULL)
			n = (size_t)(nl - buf) + 1;	/* generations start at a line */
		else
			n = cf->cf_size > 0 ? 0 : room;	/* a line longer than a generation */
		if (n == 0) {
			cf_rotate(cf);
			continue;
		}
		w = cf_write_all(cf, buf, n);
		kept += w;
		if (w < n)
			break;
		buf += n;
		len -= n;
	}
	return kept;
}

void
console_file_write(struct console_file *cf, const char *buf, size_t len)
{
	char marker[64];
	int mlen;

	if (cf->cf_pending > 0) {
		/* Say what is missing before anything that follows the gap. */
		mlen = snprintf(marker, sizeof(marker), "\n[airlock: %llu bytes dropped]\n",
		    (unsigned long long)cf->cf_pending);
		if (cf_put(cf, marker, (size_t)mlen) != (size_t)mlen) {
			cf->cf_pending += len;
			cf->cf_dropped += len;
			return;
		}
		cf->cf_pending = 0;
	}
	len -= cf_put(cf, buf, len);
	cf->cf_pending += len;
	cf->cf_dropped += len;
}

/* Append up to want bytes from the end of path to *buf. */
static void
cf_read_tail(const char *path, size_t want, char *buf, size_t *len)
{
	struct stat st;
	ssize_t n;
	off_t off;
	int fd;

	if (want == 0 || (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) == -1)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		if ((size_t)st.st_size < want)
			want = (size_t)st.st_size;
		off = st.st_size - (off_t)want;
		while (want > 0 && (n = pread(fd, buf + *len, want, off)) > 0) {
			*len += (size_t)n;
			off += n;
			want -= (size_t)n;
		}
	}
	close(fd);
}

static size_t
cf_file_size(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) ? (size_t)st.st_size : 0;
}

char *
console_file_read(const char *path, size_t tail, size_t *len)
{
	size_t cur = cf_file_size(path), want_old, skip = 0;
	char *old, *buf;

	xasprintf(&old, "%s.1", path);
	want_old = cur < tail ? tail - cur : 0;
	buf = xmalloc(tail + 1);
	*len = 0;
	cf_read_tail(old, want_old, buf, len);
	cf_read_tail(path, tail - *len, buf, len);
	free(old);
	/* Cut inside a UTF-8 sequence: start at the next character. */
	if (*len == tail)
		while (skip < 3 && skip < *len && ((unsigned char)buf[skip] & 0xc0) == 0x80)
			skip++;
	memmove(buf, buf + skip, *len - skip);
	*len -= skip;
	buf[*len] = '\0';
	return buf;
}

int
console_file_save(const char *path, const char *dst, size_t cap, char **cause)
{
	size_t len;
	char *buf = console_file_read(path, cap, &len);
	int rc;

	rc = write_file_atomic(dst, buf, len, 0600, cause);
	free(buf);
	return rc;
}

void
console_file_remove(const char *path)
{
	char *old;

	xasprintf(&old, "%s.1", path);
	unlink(path);
	unlink(old);
	free(old);
}

char *
console_escape(const char *buf, size_t len, size_t *outlen)
{
	return utf8_escape_ext(buf, len, 0, UTF8_ESC_C1 | UTF8_ESC_CRLF, outlen);
}
