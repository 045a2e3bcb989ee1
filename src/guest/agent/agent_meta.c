/*
 * E2B file metadata (envd >= 0.6.2): "X-Metadata-<key>: <value>" upload
 * headers become xattrs "user.e2b.<lowercased key>" on the file, and every
 * EntryInfo carries the file's user.e2b.* xattrs, prefix stripped, as
 * "metadata". The xattrs are set on the upload's temporary file before it
 * is renamed over the target, so the new metadata set arrives with the new
 * content and replaces the old one whole (the old inode goes away), as
 * envd's rewrite of the full set does.
 *
 * Limits (envd's): a key is an HTTP token of at most META_KEY_MAX bytes (so
 * the xattr name fits XATTR_NAME_MAX), a value printable ASCII, and the
 * xattr names plus values of one file at most META_TOTAL_MAX bytes (one
 * ext4 xattr block). A repeated key: the first value is used. meta_from_head is pure: the fuzzer calls it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/xattr.h>

#include "guest/agent/agent.h"
#include "http/http_parse.h"

#define META_HEADER	"x-metadata-"
#define META_XATTR	"user.e2b."

int
meta_from_head(const struct http_head *h, json_t **out, char *why, size_t whylen)
{
	char key[META_KEY_MAX + 1];
	size_t i, k, kl, total = 0;
	const char *name, *v;
	json_t *m = NULL;

	*out = NULL;
	for (i = 0; i < h->nheaders; i++) {
		name = h->headers[i].name;
		v = h->headers[i].value;
		if (strncasecmp(name, META_HEADER, sizeof(META_HEADER) - 1) != 0)
			continue;
		name += sizeof(META_HEADER) - 1;
		kl = strlen(name);
		if (kl == 0 || kl > META_KEY_MAX) {
			snprintf(why, whylen, "X-Metadata-%.64s: the key must be 1 to %d bytes",
			    name, META_KEY_MAX);
			goto fail;
		}
		for (k = 0; k < kl; k++) {
			if (!http_tchar((unsigned char)name[k])) {
				snprintf(why, whylen, "X-Metadata key has a character that is not "
				    "an HTTP token character");
				goto fail;
			}
			key[k] = (char)((name[k] >= 'A' && name[k] <= 'Z') ? name[k] + 32 : name[k]);
		}
		key[kl] = '\0';
		for (k = 0; v[k] != '\0'; k++) {
			if ((unsigned char)v[k] < 0x20 || (unsigned char)v[k] > 0x7e) {
				snprintf(why, whylen, "X-Metadata-%s: the value must be printable ASCII",
				    key);
				goto fail;
			}
		}
		if (m == NULL)
			m = json_object();
		/* A repeated key: the first one stands (envd reads values[0]). */
		if (json_object_get(m, key) != NULL)
			continue;
		total += sizeof(META_XATTR) - 1 + kl + k;	/* the prefix counts per key */
		if (total > META_TOTAL_MAX) {
			snprintf(why, whylen, "X-Metadata: keys and values are more than %d bytes "
			    "together", META_TOTAL_MAX);
			goto fail;
		}
		json_object_set_new(m, key, json_stringn(v, k));
	}
	*out = m;
	return 0;
fail:
	json_decref(m);
	return -1;
}

int
meta_fset(int fd, const json_t *m)
{
	char name[sizeof(META_XATTR) + META_KEY_MAX];
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)m, k, v) {
		snprintf(name, sizeof(name), META_XATTR "%s", k);
		if (fsetxattr(fd, name, json_string_value(v), strlen(json_string_value(v)), 0) == -1)
			return -1;
	}
	return 0;
}

json_t *
meta_read(const char *path)
{
	char names[8192], val[META_TOTAL_MAX + 1];
	ssize_t n, vl;
	json_t *m = NULL;
	char *p;

	/* The entry itself: a symlink's own (user xattrs cannot be set on links anyway). */
	if ((n = llistxattr(path, names, sizeof(names))) <= 0)
		return NULL;
	for (p = names; p < names + n; p += strlen(p) + 1) {
		if (strncmp(p, META_XATTR, sizeof(META_XATTR) - 1) != 0 ||
		    p[sizeof(META_XATTR) - 1] == '\0')
			continue;
		if ((vl = lgetxattr(path, p, val, sizeof(val) - 1)) < 0)
			continue;
		val[vl] = '\0';
		if (m == NULL)
			m = json_object();
		json_object_set_new(m, p + sizeof(META_XATTR) - 1, json_stringn(val, (size_t)vl));
	}
	return m;
}
