/*
 * E2B's list paging (GET /v2/sandboxes, GET /snapshots): items ordered by
 * (created ms, id), `limit` per page, the next page after X-Next-Token
 * "ms.id" (e2b_token_parse), the last item of the page. Resuming after a
 * position rather than an offset keeps pages stable when items come and go.
 */
#ifndef AIRLOCK_E2B_PAGE_H
#define AIRLOCK_E2B_PAGE_H

#include <stdint.h>

#include <jansson.h>

#include "api/api.h"
#include "e2b/e2b_parse.h"

struct e2b_item {
	json_t		*j;		/* borrowed */
	int64_t		 ms;
	const char	*id;
};

struct e2b_page {
	int		 desc;		/* newest first */
	int		 has_token;
	int64_t		 tok_ms;
	char		 tok_id[E2B_TOKEN_ID_MAX + 1];
	long long	 limit;		/* <= 0: no limit */
};

/* An RFC 3339 time field of j (airlock's answers) in unix ms; 0 when absent. */
int64_t e2b_item_ms(const json_t *j, const char *key);

/*
 * The request's nextToken into pg (limit and order are the caller's). 0, or
 * -1 having answered 400 naming nextToken.
 */
int e2b_page_init(struct api_call *, struct e2b_page *pg);

/*
 * Sort v[n], then append conv(item) for the page's items to out (NULL from
 * conv: skipped, not counted) and set X-Next-Token when more follow.
 */
void e2b_page_fill(struct api_call *, const struct e2b_page *pg, struct e2b_item *v, size_t n,
    json_t *(*conv)(struct api_call *, json_t *), json_t *out);

#endif
