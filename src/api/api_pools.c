/* /v1/pools: the warm pools per template (sandbox/sbm_pool.c), read and resized. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "common/paths.h"
#include "common/util.h"
#include "config/config.h"
#include "sandbox/sbm.h"

/* Members' ids and QEMU pids are the operator's: other keys see the counts only. */
void
api_pools_list(struct api_call *c)
{
	json_t *r = sbm_pools_json(c->api->sbm), *p;
	size_t i;

	if (strcmp(c->key.role, "admin") != 0)
		json_array_foreach(json_object_get(r, "pools"), i, p) {
			json_object_del(p, "members");
			json_object_del(json_object_get(p, "spares"), "members");
		}
	api_json(c, 200, r);
}

/* PUT /v1/pools/{template} {"size", "spares"?, "vcpus"?, "memory_mb"?, "nic"?}: admin only. */
void
api_pools_put(struct api_call *c)
{
	static const char *const fields[] = { "size", "spares", "vcpus", "memory_mb", "nic",
	    NULL };
	const char *name = c->params[0];
	long long size, spares, vcpus, mem;
	char *cause = NULL;
	int nic;

	if (!paths_valid_name(name)) {
		api_fail(c, 400, "bad_request", "template", "template: \"%s\" is not a valid name",
		    name);
		return;
	}
	if (api_check_fields(c, c->body, "body", fields) == -1 ||
	    api_get_int(c, c->body, "size", 0, CONFIG_POOL_SIZE_MAX, -1, &size) == -1 ||
	    api_get_int(c, c->body, "spares", 0, CONFIG_POOL_SPARES_MAX, -1, &spares) == -1 ||
	    api_get_int(c, c->body, "vcpus", 1, SBM_VCPUS_MAX, 0, &vcpus) == -1 ||
	    api_get_int(c, c->body, "memory_mb", SBM_MEMORY_MB_MIN, SBM_MEMORY_MB_MAX, 0,
	    &mem) == -1 ||
	    api_get_bool(c, c->body, "nic", 0, &nic) == -1)
		return;
	if (size < 0) {
		api_fail(c, 400, "bad_request", "size", "size: required (0..%d)",
		    CONFIG_POOL_SIZE_MAX);
		return;
	}
	if (sbm_pool_set(c->api->sbm, name, (int)size, (int)spares, (unsigned)vcpus,
	    (unsigned)mem, nic, &cause) == -1) {
		api_error(c, 404, "not_found", "%s", cause);
		free(cause);
		return;
	}
	api_json(c, 200, sbm_pools_json(c->api->sbm));
}
