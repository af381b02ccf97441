/*
 * evict_int.h -- what evict.c (the stack) and evict_slab.c (the slab
 * choices it shares) tell each other; private to src/evict.
 */
#ifndef SC_EVICT_INT_H
#define SC_EVICT_INT_H

#include <stdbool.h>
#include <stdint.h>

/* Move a slab of another class that holds nothing to cls (not a class's
 * only slab, not one just given, not the spared class's): true, with
 * *freed its chunks, if one moved. */
bool evict_take_empty_slab(uint8_t cls, uint32_t *freed);
/* The class this thread's run spares (evict_run_sparing); 0: none. */
void evict_spare_set(uint8_t cls);

#endif
