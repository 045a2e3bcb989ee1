/*
 * What a sandbox may leave on the host: island netns, mounts, cgroups, QEMU
 * processes, taps in the host netns. Tests snapshot this before and after
 * and require equality. Only entries naming tag (the test's sandbox-name
 * prefix) count, so other QEMUs on a shared host do not make it flaky.
 * Header-only so each test binary stays one file.
 */
#ifndef AIRLOCK_TEST_LEFTOVERS_H
#define AIRLOCK_TEST_LEFTOVERS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static __attribute__((unused)) void
lo_append(char **acc, const char *kind, const char *what)
{
	char *n;

	xasprintf(&n, "%s%s: %s\n", *acc ? *acc : "", kind, what);
	free(*acc);
	*acc = n;
}

static const char *lo_tag;

static __attribute__((unused)) void
lo_dir(char **acc, const char *kind, const char *dir, const char *prefix)
{
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 && de->d_name[0] != '.' &&
		    strstr(de->d_name, lo_tag) != NULL) {
			char *p;
			xasprintf(&p, "%s/%s", dir, de->d_name);
			lo_append(acc, kind, p);
			free(p);
		}
	}
	closedir(d);
}

/* Recursive listing of cgroup directories below dir. */
static __attribute__((unused)) void
lo_cgroups(char **acc, const char *dir, int depth)
{
	struct dirent *de;
	DIR *d;

	if (depth > 6 || (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char *p;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		xasprintf(&p, "%s/%s", dir, de->d_name);
		if (strstr(p, lo_tag) != NULL)
			lo_append(acc, "cgroup", p);
		lo_cgroups(acc, p, depth + 1);
		free(p);
	}
	closedir(d);
}

static __attribute__((unused)) char *
leftovers(const char *tag)
{
	static const char *const hier[] = { "/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu",
	    "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified", "/sys/fs/cgroup" };
	char *acc = xstrdup(""), *text = NULL, *line, *save = NULL;
	struct dirent *de;
	DIR *d;
	size_t i;

	lo_tag = tag;
	lo_dir(&acc, "netns", "/run/netns", "airlock-");
	if (read_file("/proc/self/mountinfo", 1 << 20, &text, NULL, NULL) == 0) {
		for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (strstr(line, tag) != NULL)
				lo_append(&acc, "mount", line);
		free(text);
	}
	for (i = 0; i < sizeof(hier) / sizeof(hier[0]); i++)
		if (i < 4 || access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0)
			lo_cgroups(&acc, hier[i], 0);
	if ((d = opendir("/proc")) != NULL) {
		while ((de = readdir(d)) != NULL) {
			char *p, *cmd = NULL;
			size_t len = 0, j;

			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			xasprintf(&p, "/proc/%s/cmdline", de->d_name);
			if (read_file(p, 65536, &cmd, &len, NULL) == 0) {
				for (j = 0; j + 1 < len; j++)
					if (cmd[j] == '\0')
						cmd[j] = ' ';
				if (strstr(cmd, "qemu-system") != NULL && strstr(cmd, tag) != NULL)
					lo_append(&acc, "qemu pid", de->d_name);
			}
			free(cmd);
			free(p);
		}
		closedir(d);
	}
	return acc;
}

#endif
