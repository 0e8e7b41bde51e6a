/*
 * list.h - an intrusive, circular, doubly linked list, as the kernel's list_head.
 *
 * A struct that lives on a list embeds a struct list_node; the list itself is a
 * list_node too, its head, pointing at itself when empty. No allocation, O(1) insertion
 * and removal anywhere, and no NULL checks at either end: the engines' batch queues, the
 * store's LRU and the pool's fullness groups all use it. Locking is the caller's.
 */
#ifndef ZF_LIST_H
#define ZF_LIST_H

#include <stddef.h>

struct list_node {
	struct list_node *prev, *next;
};

/* The struct of type that holds node as its member. */
#define list_entry(node, type, member) ((type *)(void *)((char *)(node)-offsetof(type, member)))

/* Walks the nodes from first to last; the loop body must not remove pos. */
#define list_for_each(pos, head) for (pos = (head)->next; pos != (head); pos = pos->next)

static inline void list_init(struct list_node *head)
{
	head->prev = head->next = head;
}

static inline int list_empty(const struct list_node *head)
{
	return head->next == head;
}

static inline void list_insert_between(struct list_node *node, struct list_node *prev,
				       struct list_node *next)
{
	node->prev = prev;
	node->next = next;
	prev->next = node;
	next->prev = node;
}

/* Puts node first on the list. */
static inline void list_add_head(struct list_node *head, struct list_node *node)
{
	list_insert_between(node, head, head->next);
}

/* Puts node last on the list. */
static inline void list_add_tail(struct list_node *head, struct list_node *node)
{
	list_insert_between(node, head->prev, head);
}

/* Takes node off its list; it then points at itself, as an empty list does. */
static inline void list_del(struct list_node *node)
{
	node->prev->next = node->next;
	node->next->prev = node->prev;
	list_init(node);
}

/* The first node, or NULL on an empty list. */
static inline struct list_node *list_first(const struct list_node *head)
{
	return list_empty(head) ? NULL : head->next;
}

/* The last node, or NULL on an empty list. */
static inline struct list_node *list_last(const struct list_node *head)
{
	return list_empty(head) ? NULL : head->prev;
}

#endif /* ZF_LIST_H */
