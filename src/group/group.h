/*
 * group.h - what a region calls on the group it is a member of (group.c).
 *
 * The group is a shared segment: the limit, the members' resident bytes summed, one slot
 * per member (its pid, its resident bytes, its last published counters) and a futex word
 * every member's reclaim thread waits on. A region reserves room in the group before a
 * unit comes in, gives it back when one goes, and its reclaim thread evicts its share of
 * what the group holds over the limit (group_share()). Bytes, not units: members may have
 * different units.
 */
#ifndef ZF_GROUP_H
#define ZF_GROUP_H

#include <stdint.h>

#include "../common/common.h"

/* Takes a slot for a region of this process: its index, or -ENOSPC. */
int group_join(zf_group *g);
/* Lets slot go: its resident bytes leave the group. */
void group_leave(zf_group *g, int slot);

/* Takes room for bytes if the group stays within limit + batch (or over is set): 1, or 0. */
int group_reserve(zf_group *g, int slot, uint64_t bytes, int over);
/* Adds bytes (may be negative) to slot's and the group's resident bytes. */
void group_add(zf_group *g, int slot, int64_t bytes);
/* Whether bytes more fit within limit + batch. */
int group_room(zf_group *g, uint64_t bytes);
/* Whether the group holds more than its limit. */
int group_over(zf_group *g);
/* What slot should evict now, in bytes: its part of what is over the limit. */
uint64_t group_share(zf_group *g, int slot);
uint64_t group_limit(const zf_group *g);
uint64_t group_batch(const zf_group *g);

/*
 * The futex word the members' reclaim threads wait on: group_kick() wakes them all
 * (pressure, room made, a request for counters); group_wait() sleeps until a kick after
 * seq was read, or timeout_ns.
 */
uint32_t group_seq(zf_group *g);
void group_kick(zf_group *g);
void group_wait(zf_group *g, uint32_t seq, uint64_t timeout_ns);

/* Reclaim's progress: around a batch, and what it evicted (bytes). */
void group_reclaiming(zf_group *g, int delta);
void group_reclaimed(zf_group *g, uint64_t bytes);
/* Whether some member is evicting now, and how much reclaim evicted ever (bytes). */
int group_busy(zf_group *g, uint64_t *reclaimed);

/* Whether slot has a request for counters to answer; then group_publish() them. */
int group_asked(zf_group *g, int slot);
void group_publish(zf_group *g, int slot, const zf_region_stats *rs, const zf_store_stats *ss);

/* Lets the slots of dead members go (at most every few ms; cheap when called often). */
void group_reap(zf_group *g);

#endif /* ZF_GROUP_H */
