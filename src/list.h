/* SPDX-License-Identifier: MIT */
/*
 * list.h - the one doubly linked list of uslab: circular, with a head node,
 * linked through a struct list_node embedded in each element (the Linux
 * list API, reduced to what uslab uses). No locking: every list is
 * protected by the lock its owner names.
 */
#ifndef USLAB_LIST_H
#define USLAB_LIST_H

#include <stdbool.h>
#include <stddef.h>

struct list_node {
	struct list_node *next, *prev;
};

#define LIST_HEAD_INIT(name)     \
	{                        \
		&(name), &(name) \
	}

/* The element of type @type whose member @member is @ptr. */
#define list_entry(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* The first (last) element of the non-empty list @head. */
#define list_first_entry(head, type, member) list_entry((head)->next, type, member)
#define list_last_entry(head, type, member) list_entry((head)->prev, type, member)

static inline void list_init(struct list_node *head)
{
	head->next = head->prev = head;
}

static inline bool list_empty(const struct list_node *head)
{
	return head->next == head;
}

static inline void list_insert(struct list_node *n, struct list_node *prev, struct list_node *next)
{
	n->next = next;
	n->prev = prev;
	prev->next = n;
	next->prev = n;
}

/* Insert @n first in @head's list. */
static inline void list_add(struct list_node *n, struct list_node *head)
{
	list_insert(n, head, head->next);
}

/* Insert @n last in @head's list. */
static inline void list_add_tail(struct list_node *n, struct list_node *head)
{
	list_insert(n, head->prev, head);
}

/* Unlink @n; its links are cleared (a deleted node is not on any list). */
static inline void list_del(struct list_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = NULL;
}

/* Move @n, on some list, to the end of @head's list (maybe the same one). */
static inline void list_move_tail(struct list_node *n, struct list_node *head)
{
	list_del(n);
	list_add_tail(n, head);
}

static inline bool list_linked(const struct list_node *n)
{
	return n->next != NULL;
}

/* Iterate over the nodes of @head; @pos may be deleted in the body. */
#define list_for_each_safe(pos, tmp, head) \
	for (pos = (head)->next, tmp = pos->next; pos != (head); pos = tmp, tmp = pos->next)

/* The same from the tail back. */
#define list_for_each_prev_safe(pos, tmp, head) \
	for (pos = (head)->prev, tmp = pos->prev; pos != (head); pos = tmp, tmp = pos->prev)

#define list_for_each(pos, head) for (pos = (head)->next; pos != (head); pos = pos->next)

/*
 * Iterate over the elements of @head, @pos pointing to each, linked by
 * their @member. @pos is formed only from real elements, never from the
 * head (an element type may be more aligned than a bare list head), and
 * must not be deleted in the body.
 */
#define list_for_each_entry(pos, head, member)                               \
	for (struct list_node *pos##_node_ = (head)->next;                   \
	     pos##_node_ != (head) &&                                        \
	     ((pos = list_entry(pos##_node_, __typeof__(*pos), member)), 1); \
	     pos##_node_ = pos##_node_->next)

#endif /* USLAB_LIST_H */
