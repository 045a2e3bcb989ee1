/* E2B's list paging by (created ms, id) position; see e2b_page.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b/e2b_page.h"
#include "http/http_server.h"

static int
cmp_item(const void *a, const void *b, void *arg)
{
	const struct e2b_item *x = a, *y = b;
	int r = x->ms < y->ms ? -1 : x->ms > y->ms ? 1 : strcmp(x->id, y->id);

	return *(const int *)arg ? -r : r;
}

int64_t
e2b_item_ms(const json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	int64_t ms = 0;
	char *cause = NULL;

	if (s != NULL && e2b_time_parse(s, &ms, &cause) == -1) {
		free(cause);
		ms = 0;
	}
	return ms;
}

int
e2b_page_init(struct api_call *c, struct e2b_page *pg)
{
	const char *tok = api_query_str(c, "nextToken");
	char *cause = NULL;

	pg->has_token = tok != NULL && *tok != '\0';
	if (pg->has_token && e2b_token_parse(tok, &pg->tok_ms, pg->tok_id, &cause) == -1) {
		api_fail(c, 400, "bad_request", "nextToken", "%s", cause);
		free(cause);
		return -1;
	}
	return 0;
}

void
e2b_page_fill(struct api_call *c, const struct e2b_page *pg, struct e2b_item *v, size_t n,
    json_t *(*conv)(struct api_call *, json_t *), json_t *out)
{
	struct e2b_item t = { NULL, pg->tok_ms, pg->tok_id };
	const struct e2b_item *last = NULL;
	long long shown = 0;
	json_t *e;
	char tok[64];

	qsort_r(v, n, sizeof(*v), cmp_item, (void *)&pg->desc);
	for (size_t i = 0; i < n; i++) {
		if (pg->has_token && cmp_item(&v[i], &t, (void *)&pg->desc) <= 0)
			continue;
		if (pg->limit > 0 && shown == pg->limit) {
			/* More follow: the token is the page's last item. */
			snprintf(tok, sizeof(tok), "%lld.%s", (long long)last->ms, last->id);
			http_req_add_header(c->req, "X-Next-Token", tok);
			return;
		}
		if ((e = conv(c, v[i].j)) == NULL)
			continue;
		json_array_append_new(out, e);
		last = &v[i];
		shown++;
	}
}
