/* The guest half of growing a sandbox disk: resize2fs over the agent (sbm_disk.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "link/envd_client.h"
#include "sandbox/sbm_disk.h"

#define SBM_DISK_GROW_TIMEOUT_MS	120000	/* the agent kills resize2fs after this */

struct sbm_disk_grow {
	struct envd_req		*req;
	sbm_disk_done_cb	 done;
	void			*arg;
	int			 ended;		/* the process's end event arrived */
	int			 exited;
	long long		 code;
	char			*status;	/* "exit status 1", "signal: killed" */
};

static void
grow_free(struct sbm_disk_grow *g)
{
	free(g->status);
	free(g);
}

static void
grow_msg(json_t *msg, void *arg)
{
	struct sbm_disk_grow *g = arg;
	json_t *end = json_object_get(json_object_get(msg, "event"), "end");
	const char *st;

	if (end == NULL)
		return;
	g->ended = 1;
	g->exited = json_is_true(json_object_get(end, "exited"));
	g->code = json_integer_value(json_object_get(end, "exitCode"));
	if ((st = json_string_value(json_object_get(end, "status"))) != NULL) {
		free(g->status);
		g->status = xstrdup(st);
	}
}

static void
grow_end(const char *error, void *arg)
{
	struct sbm_disk_grow *g = arg;
	char *msg = NULL;

	g->req = NULL;	/* envd frees the request after this callback */
	if (error != NULL)
		xasprintf(&msg, "growing the guest's root filesystem: %s", error);
	else if (!g->ended)
		xasprintf(&msg, "growing the guest's root filesystem: resize2fs never ended");
	else if (!g->exited || g->code != 0)
		/* e.g. a template without e2fsprogs (127), or not ext4 on /dev/vda */
		xasprintf(&msg, "growing the guest's root filesystem: resize2fs /dev/vda in the "
		    "guest ended with %s (the template needs e2fsprogs and an ext4 root)",
		    g->status ? g->status : "an error");
	g->done(msg, g->arg);
	free(msg);
	grow_free(g);
}

struct sbm_disk_grow *
sbm_disk_grow_start(struct agent_client *ac, const char *token, sbm_disk_done_cb done,
    void *arg, char **cause)
{
	struct sbm_disk_grow *g = xcalloc(1, sizeof(*g));
	const char *hdrs[4];
	char *tok = NULL, *tmo;
	json_t *body;

	g->done = done;
	g->arg = arg;
	body = json_pack("{s:{s:s,s:[s]},s:b}", "process", "cmd", "resize2fs", "args",
	    "/dev/vda", "stdin", 0);
	/* "root:" in Basic auth: envd's user; resize needs CAP_SYS_RESOURCE on the fs. */
	hdrs[0] = "Authorization: Basic cm9vdDo=";
	xasprintf(&tmo, "Connect-Timeout-Ms: %d", SBM_DISK_GROW_TIMEOUT_MS);
	hdrs[1] = tmo;
	hdrs[2] = NULL;
	if (token != NULL) {
		xasprintf(&tok, "X-Access-Token: %s", token);
		hdrs[2] = tok;
	}
	hdrs[3] = NULL;
	g->req = envd_stream(ac, "process.Process/Start", body, hdrs, grow_msg, grow_end, g,
	    cause);
	json_decref(body);
	free(tmo);
	free(tok);
	if (g->req == NULL) {
		grow_free(g);
		return NULL;
	}
	return g;
}

void
sbm_disk_grow_cancel(struct sbm_disk_grow *g)
{
	if (g == NULL)
		return;
	if (g->req != NULL)
		envd_req_cancel(g->req);
	grow_free(g);
}
