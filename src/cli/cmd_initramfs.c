/* airlock initramfs: write the guest initramfs (setup step). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "images/initramfs.h"

int
cmd_initramfs(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "init", required_argument, NULL, 'i' },
		{ "modules", required_argument, NULL, 'm' },
		{ "out", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 }
	};
	const char *init = NULL, *mods = NULL, *out = NULL;
	char *cause = NULL;
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "i:m:o:", longopts, NULL)) != -1) {
		switch (ch) {
		case 'i': init = optarg; break;
		case 'm': mods = optarg; break;
		case 'o': out = optarg; break;
		default: goto usage;
		}
	}
	if (init == NULL || mods == NULL || out == NULL || optind != argc)
		goto usage;
	if (initramfs_write(init, mods, out, &cause) == -1) {
		fprintf(stderr, "airlock: initramfs: %s\n", cause);
		free(cause);
		return 1;
	}
	printf("wrote %s\n", out);
	return 0;
usage:
	fprintf(stderr, "usage: airlock initramfs --init BIN --modules DIR --out FILE\n");
	return 2;
}
