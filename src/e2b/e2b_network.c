/*
 * PUT /sandboxes/{id}/network (E2B v2.25.0): the body replaces the
 * sandbox's whole network config (an omitted field is cleared), mapped by
 * e2b_network_map onto airlock's network spec and pushed to the egress
 * gateway live (sb_set_network), as airlock's own PATCH does. 204 once the
 * gateway has it.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/api_sandbox.h"
#include "common/util.h"
#include "e2b/e2b.h"
#include "e2b/e2b_netmap.h"
#include "sandbox/sbm.h"

struct net_call {
	struct api_call	*call;
	struct sandbox	*sb;
};

static void
net_done(void *arg, const char *err)
{
	struct net_call *n = arg;

	if (err != NULL && strcmp(err, SB_SHUTDOWN_CAUSE) == 0)
		;	/* the daemon is exiting: no reply, as for its other pending operations */
	else if (err != NULL)
		api_error(n->call, 502, "gateway", "%s", err);
	else
		api_no_content(n->call);
	sb_unref(n->sb);
	free(n);
}

/* The sandbox's current network mode ("none", "allowlist", "full"). */
static int
mode_is_none(struct sandbox *sb)
{
	json_t *j = sb_json(sb);
	const char *m = json_string_value(json_object_get(json_object_get(j, "network"), "mode"));
	int none = m == NULL || strcmp(m, "none") == 0;

	json_decref(j);
	return none;
}

void
e2b_sandboxes_network(struct api_call *c)
{
	char field[E2B_FIELD_MAX], *cause = NULL;
	struct sandbox *sb;
	struct net_call *n;
	json_t *net = NULL;
	const char *mode;

	if (e2b_network_map(c->body, 1, 1, &net, field, &cause) == -1) {
		api_fail(c, 400, "bad_request", field, "%s", cause);
		free(cause);
		return;
	}
	if ((sb = api_sandbox(c, -1)) == NULL) {
		json_decref(net);
		return;
	}
	mode = json_string_value(json_object_get(net, "mode"));
	if (mode_is_none(sb)) {
		/* Nothing allowed on a sandbox without an interface: already so. */
		if (strcmp(mode, "full") != 0 && json_array_size(json_object_get(net, "allow")) == 0 &&
		    json_object_get(net, "headers") == NULL) {
			json_decref(net);
			api_no_content(c);
			return;
		}
		json_decref(net);
		api_fail(c, 409, "conflict", "allow_internet_access", "sandbox \"%s\" was created "
		    "without internet access and without network.allowOut, so it has no network "
		    "interface to open; create it with network.allowOut (an empty list is enough) "
		    "to change its egress live", sb_id(sb));
		return;
	}
	n = xcalloc(1, sizeof(*n));
	n->call = c;
	n->sb = sb;
	sb_ref(sb);
	if (sb_set_network(sb, net, net_done, n, &cause) == -1) {
		api_error(c, strstr(cause, "network.mode") != NULL ? 409 : 502,
		    strstr(cause, "network.mode") != NULL ? "conflict" : "gateway", "%s", cause);
		free(cause);
		sb_unref(sb);
		free(n);
	}
	json_decref(net);
}
