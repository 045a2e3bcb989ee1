/*
 * Drop counts of every island, read off airlockd's event loop.
 *
 * Reading an island's nftables counters is libnftables over netlink inside
 * the island's namespace (setns): synchronous, about a millisecond each,
 * and many islands a round. It runs on one worker thread owned here; the
 * event loop only hands it namespace fds and takes back counts (a locked
 * list and a pipe the loop watches), so a read never holds the loop, and a
 * setns never moves the loop's thread. (airlockd has no separate privileged
 * helper process: the daemon is the privileged side that does nft work.)
 */
#ifndef AIRLOCK_EGRESS_DROPS_H
#define AIRLOCK_EGRESS_DROPS_H

#include <stdint.h>

struct event_base;
struct net_drops;
struct egress_drops;

/* On the loop: one island's counts since its previous read. */
typedef void (*egress_drops_fn)(void *arg, const char *id, const struct net_drops *,
    uint64_t window_ms);

struct egress_drops *egress_drops_new(struct event_base *, egress_drops_fn, void *arg);
/*
 * Queue a read of the island of sandbox id (its namespace is opened now, so
 * a read queued just before the island is deleted still counts its last
 * packets; final: it is the last, for a detach). A missing island is
 * skipped.
 */
void egress_drops_read(struct egress_drops *, const char *id, int final);
/* Reads queued or running (the caller polls only when the previous round is done). */
int egress_drops_busy(struct egress_drops *);
/* Stops and joins the thread; counts not delivered yet are dropped. */
void egress_drops_free(struct egress_drops *);

#endif
