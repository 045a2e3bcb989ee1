/*
 * airlock template import NAME FILE|DIR: an OCI image (docker save tarball,
 * OCI image layout as a tar or a directory) into a template. Local (root on
 * the daemon's host: oci_import in-process) or remote (the tarball streamed
 * to PUT /v1/templates/NAME/image), chosen as for template build.
 */
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/cmd_template.h"
#include "common/paths.h"
#include "common/util.h"
#include "images/oci_import.h"

const char template_import_usage[] =
    "usage: airlock template import NAME FILE|DIR [--local [--agent BIN]\n"
    "           [--disk-size-mb N] | --remote] [--json]\n"
    "  FILE      a `docker save` tarball or an OCI image layout as a tar\n"
    "  DIR       an OCI image layout directory (local only: tar it for --remote)\n"
    "  --local   import here, in-process (root on the daemon's host)\n"
    "  --remote  upload to airlockd (PUT /v1/templates/NAME/image)\n";

static int
import_local(const char *name, const char *image, const char *agent, unsigned disk_mb,
    int json_out)
{
	struct oci_import_opts o;
	struct build_progress p;
	char *cause = NULL;
	int rc;

	build_progress_init(&p, json_out);
	memset(&o, 0, sizeof(o));
	o.name = name;
	o.image = image;
	o.agent_bin = agent;
	o.disk_size_mb = disk_mb;
	o.progress = build_progress;
	o.arg = &p;
	fprintf(p.out, "importing template \"%s\" from %s\n", name, image);
	if (oci_import(&o, &cause) == -1) {
		rc = build_failed(name, cause);
		free(cause);
		return rc;
	}
	return template_local_done(&p, name, json_out);
}

static int
import_remote(const char *name, const char *image, int json_out)
{
	struct stat st;
	char *path;
	int fd, rc;

	if (stat(image, &st) == 0 && S_ISDIR(st.st_mode))
		return cli_fail("%s: a directory goes only to a local import; for --remote send "
		    "a tar of it (tar -C %s -cf image.tar .)", image, image);
	if ((fd = open(image, O_RDONLY | O_CLOEXEC)) == -1)
		return cli_fail("%s: %s", image, strerror(errno));
	xasprintf(&path, "/v1/templates/%s/image", name);
	rc = template_remote_stream(name, image, "PUT", path, "application/x-tar", NULL, 0, fd,
	    json_out, NULL);
	free(path);
	close(fd);
	return rc;
}

int
template_import_cmd(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "agent", required_argument, NULL, 'a' },
		{ "disk-size-mb", required_argument, NULL, 'd' },
		TEMPLATE_WHERE_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	const char *agent = NULL;
	unsigned long disk_mb = 0;
	char *end;
	struct template_where w = { 0, 0, 0 };
	int ch;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'a':
			agent = optarg;
			break;
		case 'd':
			disk_mb = strtoul(optarg, &end, 10);
			if (*end != '\0' || disk_mb < 256 || disk_mb > 1024 * 1024) {
				fprintf(stderr, "airlock: --disk-size-mb: 256..1048576\n");
				goto usage;
			}
			break;
		default:
			if (!template_where_opt(ch, &w))
				goto usage;
		}
	}
	if (optind != argc - 2 || (w.local && w.remote) || (w.remote && (agent || disk_mb)))
		goto usage;
	if (!paths_valid_name(argv[optind]))
		return cli_fail("invalid template name \"%s\"", argv[optind]);
	if (!w.local && !w.remote && agent == NULL && disk_mb == 0)
		w.remote = template_build_goes_remote();
	if (w.remote)
		return import_remote(argv[optind], argv[optind + 1], w.json);
	return import_local(argv[optind], argv[optind + 1], agent, (unsigned)disk_mb, w.json);
usage:
	fputs(template_import_usage, stderr);
	return CLI_EXIT_USAGE;
}
