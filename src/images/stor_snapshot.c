/* Snapshot directories: build in a temp dir, header, commit by rename, load, memfd. */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "common/paths.h"
#include "common/util.h"
#include "images/stor_snapshot.h"

#define STOR_COPY_CHUNK	(1 << 20)

int
stor_snapshot_begin(const char *id, struct stor_snapshot *sn, char **cause)
{
	char *parent;

	memset(sn, 0, sizeof(*sn));
	if (!paths_valid_name(id)) {
		cause_set(cause, "invalid snapshot id \"%s\"", id);
		return -1;
	}
	parent = paths_data("snapshots");
	if (mkdir_p(parent, 0755, cause) == -1) {
		free(parent);
		return -1;
	}
	free(parent);
	sn->sn_id = xstrdup(id);
	sn->sn_dir = paths_data("snapshots/%s", id);
	sn->sn_tmp = paths_data("snapshots/.tmp-%s", id);
	if (access(sn->sn_dir, F_OK) == 0) {
		cause_set(cause, "snapshot %s already exists", id);
		stor_snapshot_free(sn);
		return -1;
	}
	/* A leftover from a crash mid-snapshot is garbage by construction. */
	remove_tree(sn->sn_tmp, NULL);
	if (mkdir(sn->sn_tmp, 0755) == -1) {
		cause_set(cause, "mkdir %s: %s", sn->sn_tmp, strerror(errno));
		stor_snapshot_free(sn);
		return -1;
	}
	return 0;
}

char *
stor_snapshot_tmp_path(const struct stor_snapshot *sn, const char *file)
{
	char *p;

	xasprintf(&p, "%s/%s", sn->sn_tmp, file);
	return p;
}

static int
stor_fsync_path(const char *path, char **cause)
{
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "open %s: %s", path, strerror(errno));
		return -1;
	}
	if (fsync(fd) == -1) {
		cause_set(cause, "fsync %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int
stor_snapshot_commit(struct stor_snapshot *sn, const struct stor_snap_header *h,
    char **cause)
{
	static const char *const files[] = { STOR_SNAP_DEVSTATE, STOR_SNAP_MEM,
	    STOR_SNAP_ROOTFS };
	char *text, *p;
	json_t *o;
	size_t i;
	int rc;

	o = json_pack("{s:i, s:s, s:s, s:i, s:i, s:s, s:s, s:I, s:I, s:s}",
	    "format", h->format, "template", h->template, "kernel", h->kernel,
	    "memory_mb", (int)h->memory_mb, "vcpus", (int)h->vcpus, "devices", h->devices,
	    "devstate_sha256", h->devstate_sha256, "devstate_size", (json_int_t)h->devstate_size,
	    "mem_size", (json_int_t)h->mem_size, "created", h->created);
	if (o == NULL) {
		cause_set(cause, "snapshot header: cannot encode");
		return -1;
	}
	text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(o);
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		p = stor_snapshot_tmp_path(sn, files[i]);
		rc = chmod(p, 0444) == 0 ? stor_fsync_path(p, cause) : -1;
		if (rc == -1 && (cause == NULL || *cause == NULL))
			cause_set(cause, "chmod %s: %s", p, strerror(errno));
		free(p);
		if (rc == -1) {
			free(text);
			return -1;
		}
	}
	p = stor_snapshot_tmp_path(sn, STOR_SNAP_HEADER);
	rc = write_file_atomic(p, text, strlen(text), 0444, cause);
	free(p);
	free(text);
	if (rc == -1)
		return -1;
	if (rename(sn->sn_tmp, sn->sn_dir) == -1) {
		cause_set(cause, "rename %s to %s: %s", sn->sn_tmp, sn->sn_dir, strerror(errno));
		return -1;
	}
	return stor_fsync_path(sn->sn_dir, cause);
}

void
stor_snapshot_abort(struct stor_snapshot *sn)
{
	if (sn->sn_tmp != NULL)
		remove_tree(sn->sn_tmp, NULL);
}

void
stor_snapshot_free(struct stor_snapshot *sn)
{
	free(sn->sn_id);
	free(sn->sn_dir);
	free(sn->sn_tmp);
	memset(sn, 0, sizeof(*sn));
}

int
stor_snapshot_remove(const char *dir, char **cause)
{
	return remove_tree(dir, cause);
}

static int
hdr_str(json_t *o, const char *key, char **out, char **cause)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v)) {
		cause_set(cause, "header field \"%s\" missing or not a string", key);
		return -1;
	}
	*out = xstrdup(json_string_value(v));
	return 0;
}

static int
hdr_uint(json_t *o, const char *key, uint64_t max, uint64_t *out, char **cause)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max) {
		cause_set(cause, "header field \"%s\" missing or out of range", key);
		return -1;
	}
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int
stor_snap_header_parse(const char *text, size_t len, struct stor_snap_header *h, char **cause)
{
	json_error_t jerr;
	json_t *o;
	char *sha = NULL;
	uint64_t v;

	memset(h, 0, sizeof(*h));
	if ((o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
		cause_set(cause, "corrupt header: %s (line %d)", jerr.text, jerr.line);
		return -1;
	}
	if (!json_is_object(o)) {
		cause_set(cause, "corrupt header: not an object");
		goto bad;
	}
	if (hdr_uint(o, "format", 1000, &v, cause) == -1)
		goto bad_field;
	h->format = (int)v;
	if (h->format != STOR_SNAP_FORMAT) {
		cause_set(cause, "snapshot format %d, this airlock reads format %d", h->format,
		    STOR_SNAP_FORMAT);
		goto bad;
	}
	if (hdr_str(o, "template", &h->template, cause) == -1 ||
	    hdr_str(o, "kernel", &h->kernel, cause) == -1 ||
	    hdr_str(o, "devices", &h->devices, cause) == -1 ||
	    hdr_str(o, "created", &h->created, cause) == -1 ||
	    hdr_str(o, "devstate_sha256", &sha, cause) == -1)
		goto bad_field;
	if (strlen(sha) != 64 || strspn(sha, "0123456789abcdef") != 64) {
		cause_set(cause, "header field \"devstate_sha256\" is not a SHA-256");
		goto bad_field;
	}
	memcpy(h->devstate_sha256, sha, 65);
	if (hdr_uint(o, "memory_mb", 1 << 20, &v, cause) == -1)
		goto bad_field;
	h->memory_mb = (unsigned)v;
	if (hdr_uint(o, "vcpus", 1024, &v, cause) == -1)
		goto bad_field;
	h->vcpus = (unsigned)v;
	if (hdr_uint(o, "devstate_size", STOR_SNAP_DEVSTATE_MAX, &h->devstate_size, cause) == -1 ||
	    hdr_uint(o, "mem_size", UINT64_C(1) << 50, &h->mem_size, cause) == -1)
		goto bad_field;
	free(sha);
	json_decref(o);
	return 0;
bad_field:
	cause_wrap(cause, "corrupt header");
bad:
	free(sha);
	json_decref(o);
	stor_snap_header_free(h);
	return -1;
}

int
stor_snapshot_load(const char *dir, struct stor_snap_header *h, char **cause)
{
	char *path, *text = NULL;
	size_t len;
	int rc;

	memset(h, 0, sizeof(*h));
	xasprintf(&path, "%s/%s", dir, STOR_SNAP_HEADER);
	if (read_file(path, STOR_SNAP_HEADER_MAX, &text, &len, cause) == -1) {
		free(path);
		return -1;
	}
	if ((rc = stor_snap_header_parse(text, len, h, cause)) == -1)
		cause_wrap(cause, "%s", path);
	free(text);
	free(path);
	return rc;
}

void
stor_snap_header_free(struct stor_snap_header *h)
{
	free(h->template);
	free(h->kernel);
	free(h->devices);
	free(h->created);
	memset(h, 0, sizeof(*h));
}

int
stor_fd_sha256(int fd, uint64_t max, char out[65], uint64_t *size, char **cause)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[32];
	unsigned int mdlen;
	EVP_MD_CTX *ctx;
	char *buf;
	uint64_t total = 0;
	ssize_t n;
	int i;

	if (lseek(fd, 0, SEEK_SET) == -1) {
		cause_set(cause, "seek: %s", strerror(errno));
		return -1;
	}
	buf = xmalloc(STOR_COPY_CHUNK);
	ctx = EVP_MD_CTX_new();
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	while ((n = read(fd, buf, STOR_COPY_CHUNK)) > 0) {
		total += (uint64_t)n;
		if (total > max)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	EVP_MD_CTX_free(ctx);
	free(buf);
	if (n == -1) {
		cause_set(cause, "read: %s", strerror(errno));
		return -1;
	}
	if (total > max) {
		cause_set(cause, "larger than %llu bytes", (unsigned long long)max);
		return -1;
	}
	for (i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
	if (size != NULL)
		*size = total;
	if (lseek(fd, 0, SEEK_SET) == -1) {
		cause_set(cause, "seek: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int
stor_snapshot_memfd(const char *dir, uint64_t size, int *out, char **cause)
{
	struct stat st;
	char *path, *buf;
	uint64_t off = 0;
	ssize_t n;
	int in, fd;

	xasprintf(&path, "%s/%s", dir, STOR_SNAP_MEM);
	if ((in = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		cause_set(cause, "open %s: %s", path, strerror(errno));
		free(path);
		return -1;
	}
	if (fstat(in, &st) == -1 || (uint64_t)st.st_size != size) {
		cause_set(cause, "%s: size %lld, header says %llu", path, (long long)st.st_size,
		    (unsigned long long)size);
		goto bad_in;
	}
	if ((fd = memfd_create("airlock-base-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING)) == -1) {
		cause_set(cause, "memfd_create: %s", strerror(errno));
		goto bad_in;
	}
	if (ftruncate(fd, (off_t)size) == -1) {
		cause_set(cause, "memfd size %llu: %s", (unsigned long long)size, strerror(errno));
		goto bad;
	}
	/* Copy only what is allocated in the sparse file: holes stay holes. */
	buf = xmalloc(STOR_COPY_CHUNK);
	while (off < size) {
		off_t data = lseek(in, (off_t)off, SEEK_DATA), hole;

		if (data == -1)
			break;	/* ENXIO: only a hole remains */
		hole = lseek(in, data, SEEK_HOLE);
		for (off = (uint64_t)data; off < (uint64_t)hole; off += (uint64_t)n) {
			size_t want = (uint64_t)hole - off < STOR_COPY_CHUNK ?
			    (size_t)((uint64_t)hole - off) : STOR_COPY_CHUNK;
			if ((n = pread(in, buf, want, (off_t)off)) <= 0 ||
			    pwrite(fd, buf, (size_t)n, (off_t)off) != n) {
				cause_set(cause, "copy %s into memfd: %s", path,
				    n == 0 ? "short read" : strerror(errno));
				free(buf);
				goto bad;
			}
		}
	}
	free(buf);
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == -1) {
		cause_set(cause, "seal memfd: %s", strerror(errno));
		goto bad;
	}
	close(in);
	free(path);
	*out = fd;
	return 0;
bad:
	close(fd);
bad_in:
	close(in);
	free(path);
	return -1;
}
