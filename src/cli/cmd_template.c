/*
 * airlock template build|ls|rm. build runs locally (no daemon needed); ls and
 * rm go through the API when airlockd answers, so they see what the daemon
 * sees and rm is refused while sandboxes use the template; with no daemon
 * they fall back to the local data dir.
 */
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/cli_http.h"
#include "common/paths.h"
#include "common/util.h"
#include "storage/recipe.h"
#include "storage/template_build.h"

static double
cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct build_progress {
	double	start, step_start;
	int	step;
};

static void
build_progress(void *arg, int step, int nsteps, const char *msg)
{
	struct build_progress *p = arg;
	double now = cli_now();

	if (p->step != 0 && step != p->step)
		printf("      done in %.1fs\n", now - p->step_start);
	if (step != p->step)
		p->step_start = now;
	p->step = step;
	printf("[%d/%d] %s\n", step, nsteps, msg);
	fflush(stdout);
}

static int
template_build_cmd(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "recipe", required_argument, NULL, 'r' },
		{ "agent", required_argument, NULL, 'a' },
		{ "no-cache", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 }
	};
	struct template_build_opts o;
	struct build_progress p;
	struct recipe r;
	char *cause = NULL;
	int ch;

	memset(&o, 0, sizeof(o));
	optind = 1;
	while ((ch = getopt_long(argc, argv, "r:a:n", longopts, NULL)) != -1) {
		switch (ch) {
		case 'r':
			o.recipe_path = optarg;
			break;
		case 'a':
			o.agent_bin = optarg;
			break;
		case 'n':
			o.no_cache = 1;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc - 1 || o.recipe_path == NULL)
		goto usage;
	o.name = argv[optind];
	if (recipe_load(o.recipe_path, &r, &cause) == -1) {
		fprintf(stderr, "airlock: recipe %s: %s\n", o.recipe_path, cause);
		free(cause);
		return 1;
	}
	memset(&p, 0, sizeof(p));
	p.start = cli_now();
	o.progress = build_progress;
	o.progress_arg = &p;
	printf("building template \"%s\" from %s\n", o.name, o.recipe_path);
	if (template_build(&r, &o, &cause) == -1) {
		fprintf(stderr, "airlock: template %s: %s\n", o.name, cause);
		fprintf(stderr, "airlock: the previous template \"%s\" (if any) is unchanged\n",
		    o.name);
		free(cause);
		recipe_free(&r);
		return 1;
	}
	printf("      done in %.1fs\ntemplate \"%s\" built in %.1fs: %s/templates/%s\n",
	    cli_now() - p.step_start, o.name, cli_now() - p.start, paths_data_dir(), o.name);
	recipe_free(&r);
	return 0;
usage:
	fprintf(stderr, "usage: airlock template build NAME --recipe FILE [--agent BIN] [--no-cache]\n");
	return 2;
}

/*
 * Ask airlockd. Returns 1 with *out set when it answered, 0 when it could
 * not be reached (the caller goes local), -1 after printing its error.
 */
static int
template_api(const char *method, const char *path, json_t **out)
{
	struct cli_api *api;
	char *cause = NULL;
	int status = 0;

	if ((api = cli_api_new(&cause)) == NULL) {
		free(cause);
		return 0;
	}
	*out = cli_api_json(api, method, path, NULL, &status, &cause);
	cli_api_free(api);
	if (*out != NULL)
		return 1;
	if (status == 0) {
		free(cause);
		return 0;
	}
	cli_fail_cause(cause);
	return -1;
}

static int
template_ls_cmd(int argc, char **argv)
{
	char *dir, *meta;
	struct dirent *de;
	json_error_t err;
	json_t *m, *r;
	DIR *d;
	int json_out = argc > 1 && strcmp(argv[1], "--json") == 0;
	json_t *all;

	switch (template_api("GET", "/v1/templates", &r)) {
	case -1:
		return 1;
	case 1:
		all = json_incref(json_object_get(r, "templates"));
		json_decref(r);
		if (!json_is_array(all)) {
			json_decref(all);
			return cli_fail("airlockd's template list has no \"templates\" array");
		}
		goto print;
	}
	dir = paths_data("templates");
	all = json_array();
	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			xasprintf(&meta, "%s/%s/template.json", dir, de->d_name);
			if ((m = json_load_file(meta, 0, &err)) != NULL)
				json_array_append_new(all, m);
			free(meta);
		}
		closedir(d);
	}
	free(dir);
print:
	if (json_out) {
		json_dumpf(all, stdout, JSON_INDENT(2));
		printf("\n");
	} else {
		size_t i;
		printf("%-20s %-34s %-22s %10s\n", "NAME", "KERNEL", "BUILT", "DISK_MB");
		char t[32];
		json_array_foreach(all, i, m) {
			cli_cell(stdout, cli_field(m, "name", t, sizeof(t)), 20);
			fputc(' ', stdout);
			cli_cell(stdout, cli_field(m, "kernel_release", t, sizeof(t)), 34);
			fputc(' ', stdout);
			cli_cell(stdout, cli_field(m, "built_at", t, sizeof(t)), 22);
			printf(" %10lld\n",
			    (long long)json_integer_value(json_object_get(m, "disk_size_mb")));
		}
	}
	json_decref(all);
	return 0;
}

static int
template_rm_cmd(int argc, char **argv)
{
	char *dir, *cause = NULL;
	json_t *r;

	if (argc != 2) {
		fprintf(stderr, "usage: airlock template rm NAME\n");
		return 2;
	}
	if (!paths_valid_name(argv[1])) {
		fprintf(stderr, "airlock: invalid template name \"%s\"\n", argv[1]);
		return 1;
	}
	xasprintf(&dir, "/v1/templates/%s", argv[1]);
	switch (template_api("DELETE", dir, &r)) {
	case -1:
		free(dir);
		return 1;
	case 1:
		free(dir);
		json_decref(r);
		printf("removed template \"%s\"\n", argv[1]);
		return 0;
	}
	free(dir);
	dir = paths_data("templates/%s", argv[1]);
	if (!path_exists(dir)) {
		fprintf(stderr, "airlock: template \"%s\" not found\n", argv[1]);
		free(dir);
		return 1;
	}
	if (remove_tree(dir, &cause) == -1) {
		fprintf(stderr, "airlock: %s\n", cause);
		free(cause);
		free(dir);
		return 1;
	}
	free(dir);
	printf("removed template \"%s\"\n", argv[1]);
	return 0;
}

static const struct cli_cmd template_cmds[] = {
	{ "build", "build NAME --recipe FILE", "build a template from a recipe",
	  template_build_cmd, NULL },
	{ "ls", "ls [--json]", "list templates", template_ls_cmd, NULL },
	{ "rm", "rm NAME", "remove a template", template_rm_cmd, NULL },
	{ NULL, NULL, NULL, NULL, NULL }
};

int
cmd_template(int argc, char **argv)
{
	return cli_dispatch("airlock template", template_cmds, argc - 1, argv + 1);
}
