/* The template build step cache (template_steps.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/digest.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/reflink.h"
#include "images/template_steps.h"

void
tsteps_key(const char *prev, const char *step, const char *context_sha, char out[65])
{
	char *buf;

	/* Lengths first: no step text can be built to collide with another split. */
	xasprintf(&buf, "step v1\n%s\n%zu\n%s\n%s\n", prev, strlen(step), step,
	    context_sha != NULL ? context_sha : "");
	sha256_hex(buf, strlen(buf), out);
	free(buf);
}

char *
tsteps_path(const char *key)
{
	return paths_data("steps/%s.ext4", key);
}

int
tsteps_lookup(const char *key)
{
	char *p = tsteps_path(key);
	int found = access(p, R_OK) == 0;

	/* The entry's mtime is its last use: what LRU pruning orders by. */
	if (found && utimensat(AT_FDCWD, p, NULL, 0) == -1)
		log_warn("touch %s", p);
	free(p);
	return found;
}

int
tsteps_store(const char *image, const char *key, char **cause)
{
	char *dir = paths_data("steps"), *p = tsteps_path(key), *tmp;
	int rc = -1;

	xasprintf(&tmp, "%s.tmp.%ld", p, (long)getpid());
	if (mkdir_p(dir, 0700, cause) == -1)
		goto out;
	unlink(tmp);
	if (reflink_copy(image, tmp, cause) == -1)
		goto out;
	if (chmod(tmp, 0400) == -1 || rename(tmp, p) == -1) {
		cause_set(cause, "step cache %s: %s", p, strerror(errno));
		unlink(tmp);
		goto out;
	}
	rc = 0;
out:
	free(tmp);
	free(p);
	free(dir);
	return rc;
}

struct tsteps_ent {
	char		*path;
	time_t		 mtime;
	uint64_t	 bytes;
};

static int
ent_cmp(const void *a, const void *b)
{
	const struct tsteps_ent *x = a, *y = b;

	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

void
tsteps_prune(uint64_t max_bytes, const char *keep)
{
	char *dir = paths_data("steps"), *keep_path = keep ? tsteps_path(keep) : NULL;
	struct tsteps_ent *ents = NULL;
	struct dirent *de;
	struct stat st;
	uint64_t total = 0;
	size_t n = 0, i;
	DIR *d;

	if ((d = opendir(dir)) == NULL) {
		free(dir);
		free(keep_path);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		char *p;
		size_t l = strlen(de->d_name);
		if (l < 5 || strcmp(de->d_name + l - 5, ".ext4") != 0)
			continue;
		xasprintf(&p, "%s/%s", dir, de->d_name);
		if (stat(p, &st) == -1) {
			free(p);
			continue;
		}
		ents = xreallocarray(ents, n + 1, sizeof(*ents));
		ents[n].path = p;
		ents[n].mtime = st.st_mtime;
		ents[n].bytes = (uint64_t)st.st_blocks * 512;
		total += ents[n].bytes;
		n++;
	}
	closedir(d);
	qsort(ents, n, sizeof(*ents), ent_cmp);
	for (i = 0; i < n; i++) {
		if (total > max_bytes && (keep_path == NULL || strcmp(ents[i].path, keep_path) != 0)) {
			if (unlink(ents[i].path) == 0) {
				log_info("step cache: pruned %s (%llu MiB)", ents[i].path,
				    (unsigned long long)(ents[i].bytes >> 20));
				total -= ents[i].bytes;
			}
		}
		free(ents[i].path);
	}
	free(ents);
	free(dir);
	free(keep_path);
}
