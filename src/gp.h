/* SPDX-License-Identifier: MIT */
/*
 * gp.h - layer 4, gp.c: the grace-period engine.
 */
#ifndef USLAB_GP_H
#define USLAB_GP_H

#include "cache.h"

/* -------------------------------------------------------------- gp.c */

struct rcu_flavor_struct;

/*
 * struct gp_client - what the kfree_rcu front end (rcu.c) does in each
 * round of the monitor; called by the monitor (or by gp_barrier()'s
 * caller without one) under round_lock with no other lock held, except
 * @idle, which the monitor calls between rounds with no lock at all.
 * @gather:        take what is queued (@scan: partly filled blocks too;
 *                 @all: however recent). Return: a batch, NULL if none.
 * @drain:         free a batch after its grace period.
 * @idle:          work between rounds (the spare pool).
 * @after_barrier: after a barrier round (flush what the round freed).
 */
struct gp_client {
	void *(*gather)(bool scan, bool all);
	void (*drain)(void *batch);
	void (*idle)(void);
	void (*after_barrier)(void);
};

INTERNAL const struct rcu_flavor_struct *gp_flavor(void);
INTERNAL int gp_set_flavor(const struct rcu_flavor_struct *f);
INTERNAL void gp_set_client(const struct gp_client *client);
INTERNAL bool gp_read_ongoing(void);
INTERNAL void gp_synchronize(void);
INTERNAL void gp_wake(void);
INTERNAL int gp_start(void);
INTERNAL int gp_prestart(void);
INTERNAL void gp_kick(void);
INTERNAL void gp_need_start(void);
INTERNAL bool gp_used(void);
INTERNAL void gp_defer_slabs(struct slab *list);
INTERNAL void gp_barrier(void);
INTERNAL void gp_wait_until(bool (*cond)(void));
INTERNAL void gp_stats(uint64_t *deferred, uint64_t *released);
INTERNAL void gp_fork_prepare(void);
INTERNAL void gp_fork_prepare_late(void);
INTERNAL void gp_fork_parent(void);
INTERNAL void gp_fork_parent_early(void);
INTERNAL void gp_fork_child(void);

#endif /* USLAB_GP_H */
