/*
 * memo.h — a small content-keyed memo table for the task-graph builder:
 * records of int32 words (a key, then a value) found by the whole key.
 *
 * The builder memoizes pure functions of the machine with it (routes
 * between two devices, collective costs for a kind, device list and byte
 * count): the value stored is exactly what the function returned, so a hit
 * gives bit-identical results. Doubles are stored as two words
 * (ss_memo_put_double / ss_memo_get_double).
 *
 * Bounded: once the records exceed the word limit given to ss_memo_init,
 * the next insertion clears the table first (the search proposes configs
 * without end; the working set is what recent builds used). A lookup never
 * allocates; an insertion either stores the whole record or, on allocation
 * failure, nothing (the table stays as it was).
 */
#ifndef SS_MEMO_H
#define SS_MEMO_H

#include <stdint.h>

typedef struct ss_memo {
    int32_t *slot;   /* open addressing: record offset + 1, 0 = empty */
    uint64_t *hash;  /* hash of the record in each slot */
    int cap, n;      /* slots (power of two), records */
    int32_t *pool;   /* records: [key_len, key..., val_len, val...] */
    int64_t used, cap_pool, limit;
    int64_t hits, misses, clears;
} ss_memo;

/* An empty table that clears itself past `limit_words` words of records. */
void ss_memo_init(ss_memo *mm, int64_t limit_words);
void ss_memo_clear(ss_memo *mm); /* forget every record, keep the storage */
void ss_memo_free(ss_memo *mm);  /* release the storage; the table is empty */

/* The value stored for key[0..klen), its length in *vlen; NULL if absent.
 * Borrowed: valid until the next insertion or clear. */
const int32_t *ss_memo_get(ss_memo *mm, const int32_t *key, int klen, int *vlen);

/* Store val[0..vlen) for key[0..klen) (the key must be absent). 0 on
 * success, -1 on allocation failure (nothing stored). */
int ss_memo_put(ss_memo *mm, const int32_t *key, int klen, const int32_t *val, int vlen);

/* Two words holding x, and back (bit-exact). */
void ss_memo_put_double(int32_t *w, double x);
double ss_memo_get_double(const int32_t *w);

#endif /* SS_MEMO_H */
