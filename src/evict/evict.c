/*
 * evict.c -- the policy stack behind evict_run().
 *
 * The stack is an immutable array published by pointer swap, so the set
 * path reads it without a lock while `config evict` may replace it. Every
 * distinct stack ever built is kept until teardown (a reader may still be
 * walking a retired one) and reused when asked for again, so repeated
 * `config evict` commands cannot grow memory: there are at most a few
 * hundred distinct orderings of the five policies.
 */
#include "evict.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flash.h"
#include "item.h"
#include "slab.h"

struct evict_stack {
    const struct evict_policy *policy[EVICT_LIST_MAX];
    size_t                     n;
    struct evict_stack        *next;    /* all stacks built, freed at teardown */
};

static const struct evict_policy *const known[] = {
    &evict_policy_auto,
    &evict_policy_lru,
    &evict_policy_random,
    &evict_policy_lra,
    &evict_policy_lrc,
    &evict_policy_none,
};

static _Atomic uint64_t skipped_busy;
static _Atomic uint64_t judged_last_ms;    /* last move_budget_take() */
static _Atomic uint64_t seed_salt;

static _Atomic(struct evict_stack *) current;
static struct evict_stack *all_stacks;  /* guarded by configure_lock */
static pthread_mutex_t configure_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct evict_policy *
policy_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strlen(known[i]->name) == len && memcmp(known[i]->name, name, len) == 0) {
            return known[i];
        }
    }
    return NULL;
}

/* Parse "a,b,c" into s; false on an unknown, empty or repeated name. */
static bool
stack_parse(const char *list, size_t len, struct evict_stack *s)
{
    const char *p = list, *end = list + len;

    s->n = 0;
    if (len == 0 || len >= EVICT_NAMES_MAX) {
        return false;
    }
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *tok_end = comma ? comma : end;
        const struct evict_policy *pol = policy_find(p, (size_t)(tok_end - p));
        if (pol == NULL || s->n == EVICT_LIST_MAX) {
            return false;
        }
        for (size_t i = 0; i < s->n; i++) {
            if (s->policy[i] == pol) {
                return false;
            }
        }
        s->policy[s->n++] = pol;
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    return true;
}

static struct evict_stack *
stack_intern(const struct evict_stack *want)
{
    for (struct evict_stack *s = all_stacks; s != NULL; s = s->next) {
        if (s->n == want->n &&
            memcmp(s->policy, want->policy, want->n * sizeof(want->policy[0])) == 0) {
            return s;
        }
    }
    struct evict_stack *s = malloc(sizeof(*s));
    if (s != NULL) {
        *s = *want;
        s->next = all_stacks;
        all_stacks = s;
    }
    return s;
}

int
evict_configure(const char *list, size_t len)
{
    struct evict_stack want = { .n = 0 };
    int rc = -1;

    if (!stack_parse(list, len, &want)) {
        return -1;
    }
    pthread_mutex_lock(&configure_lock);
    for (size_t i = 0; i < want.n; i++) {
        if (want.policy[i]->setup != NULL && want.policy[i]->setup() != 0) {
            goto out;
        }
    }
    struct evict_stack *s = stack_intern(&want);
    if (s != NULL) {
        atomic_store(&current, s);
        rc = 0;
    }
out:
    pthread_mutex_unlock(&configure_lock);
    return rc;
}

int
evict_setup(const char *list)
{
    return evict_configure(list, strlen(list));
}

void
evict_teardown(void)
{
    struct evict_stack *s = atomic_exchange(&current, NULL);

    for (size_t i = 0; s != NULL && i < sizeof(known) / sizeof(known[0]); i++) {
        if (known[i]->teardown != NULL) {
            known[i]->teardown();
        }
    }
    pthread_mutex_lock(&configure_lock);
    while (all_stacks != NULL) {
        struct evict_stack *next = all_stacks->next;
        free(all_stacks);
        all_stacks = next;
    }
    pthread_mutex_unlock(&configure_lock);
}

void
evict_names(char *buf, size_t cap)
{
    struct evict_stack *s = atomic_load(&current);
    size_t off = 0;

    if (cap == 0) {
        return;
    }
    buf[0] = '\0';
    for (size_t i = 0; s != NULL && i < s->n; i++) {
        size_t n = strlen(s->policy[i]->name);
        if (off + n + 2 > cap) {
            break;
        }
        if (i > 0) {
            buf[off++] = ',';
        }
        memcpy(buf + off, s->policy[i]->name, n);
        off += n;
        buf[off] = '\0';
    }
}

/* Is there an item-level policy after position i to fall back on? */
static bool
stack_has_item_level_after(const struct evict_stack *s, size_t i)
{
    for (size_t j = i + 1; j < s->n; j++) {
        if (s->policy[j]->evict_items != NULL) {
            return true;
        }
    }
    return false;
}

static bool
stack_has_slab_level(const struct evict_stack *s)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->policy[i]->slab_level) {
            return true;
        }
    }
    return false;
}

bool
evict_has_slab_level(void)
{
    struct evict_stack *s = atomic_load_explicit(&current, memory_order_acquire);

    return s != NULL && stack_has_slab_level(s);
}

const char *
evict_automove_stack(unsigned level)
{
    static const char *const stacks[] = { "lru", "auto", "lrc" };

    return level < 3 ? stacks[level] : NULL;
}

unsigned
evict_automove_level(void)
{
    struct evict_stack *s = atomic_load_explicit(&current, memory_order_acquire);

    if (s == NULL || !stack_has_slab_level(s)) {
        return 0;
    }
    for (size_t i = 0; i < s->n; i++) {
        if (s->policy[i]->evict_items != NULL) {
            return 1;
        }
    }
    return 2;
}

/*
 * A slab of another class with nothing allocated in it is free memory
 * carved for the wrong size: moving it evicts nothing, so it goes before
 * any policy is asked to judge victims. Without this a value that grows
 * by appends leaves an empty slab in every class it passes through (58 of
 * -m 64's 64 slabs at -f 1.08), and the policies drop live slabs while
 * those sit idle. The damping rule still holds: a class's only slab,
 * used within the last second, stays.
 */
/*
 * The slab evict_slab_for() last gave a class (the flash tier's stubs,
 * which ask before they run out): empty because it was just given, not
 * because its class does not need it. Taking it back as "empty" at once
 * passed it around in a circle (2 slab moves per set in flash-bench), so
 * it is spared for EVICT_LAST_SLAB_MS.
 */
static _Atomic uint32_t given_sid = SLAB_ID_NONE;
static _Atomic uint64_t given_until_ms;

static bool
slab_just_given(uint32_t sid)
{
    return atomic_load(&given_sid) == sid && atomic_load(&given_until_ms) > clock_now_ms();
}

static bool
take_empty_slab(uint8_t cls, uint32_t *freed)
{
    uint32_t sid = 0;

    for (int tries = 0; tries < EVICT_PICKS; tries++, sid++) {
        sid = slab_find_empty(cls, sid);
        if (sid == SLAB_ID_NONE) {
            return false;
        }
        if (evict_slab_last_in_use(sid) || slab_just_given(sid)) {
            continue;
        }
        if (slab_move_empty(sid, cls)) {
            *freed = slab_class_perslab(cls);
            return true;
        }
    }
    return false;
}

/* Walk the stack until a policy frees memory; items_only: item-level parts only. */
static evict_rstatus_t
stack_run(uint8_t cls, uint32_t batch, uint32_t *freed, bool items_only)
{
    struct evict_stack *s = atomic_load_explicit(&current, memory_order_acquire);
    struct evict_req req = { .cls = cls, .batch = batch > 0 ? batch : 1 };
    uint32_t got = 0;

    if (s != NULL && !items_only && stack_has_slab_level(s) &&
        take_empty_slab(cls, &got)) {
        if (freed != NULL) {
            *freed = got;
        }
        return EVICT_OK;
    }

    for (size_t i = 0; s != NULL && i < s->n; i++) {
        const struct evict_policy *p = s->policy[i];
        if (items_only && p->evict_items == NULL) {
            continue;
        }
        req.gated = p->slab_level && stack_has_item_level_after(s, i);
        req.damp = req.gated;
        req.freed = 0;
        if ((items_only ? p->evict_items(&req) : p->evict(&req)) == EVICT_OK) {
            if (freed != NULL) {
                *freed = req.freed;
            }
            return EVICT_OK;
        }
    }
    return EVICT_FAIL;
}

evict_rstatus_t
evict_run(uint8_t cls, uint32_t batch, uint32_t *freed)
{
    return stack_run(cls, batch, freed, false);
}

evict_rstatus_t
evict_run_items(uint8_t cls, uint32_t batch, uint32_t *freed)
{
    return stack_run(cls, batch, freed, true);
}

/*
 * A move by judgement takes the cache-wide budget of one per EVICT_MOVE_MS.
 * Judgements rest on ages of a few milliseconds where a class holds a few
 * large items (its probation quota is one), so on the mixed load at -m 64
 * they passed ~1,000 times a second with no trend behind them: 15,000-
 * 35,000 slabs moved in 25 s, each losing the items it held, and every
 * slab-level stack fell below memcached (0.909-0.916 against 0.916) and
 * below `lru`, which moves none (0.922). Budgeted: 230-1,800 moves, every
 * stack 0.920-0.923 (notes/eviction.md).
 * A real shift of memory between classes moves at up to 10 MB/s this way;
 * a shift to a new value size goes unbudgeted (victim_colder()).
 */
static bool
move_budget_take(uint64_t now)
{
    uint64_t last = atomic_load_explicit(&judged_last_ms, memory_order_relaxed);

    return last + EVICT_MOVE_MS <= now &&
           atomic_compare_exchange_strong(&judged_last_ms, &last, now);
}

/*
 * Toward a class of many more, smaller items a slab also moves when the
 * victim's class keeps its new items longer than cls does, weighed by how
 * many more items the slab holds for cls: the classes then settle where
 * age / items per slab is equal, i.e. about equal bytes per class, which
 * is what most hits per byte asks for under Zipf(1.0) popularity (notes/
 * eviction.md). Memory never flows toward larger items this way, so it
 * cannot circle. Without it the steady load (100 B, 1 KB, 10 KB values)
 * lost the drift toward small items that gave it 0.94-0.95 (0.93).
 */
static bool
probation_balance(uint8_t cls, uint8_t vcls, uint64_t age)
{
    uint64_t n = slab_class_perslab(cls), vn = slab_class_perslab(vcls), vsince;

    if (n < 2 * vn || !item_probation_due(vcls, &vsince)) {
        return false;
    }
    uint64_t now = clock_now_ms(), vage = now > vsince ? now - vsince : 0;
    if (vage * n <= age * vn) {
        return false;
    }
    /* Budgeted: the drift is slow by nature (24 moves in the steady
     * load's 50 s), while small classes of a few large items each make the
     * ages noisy; the mixed load moved 6,000 slabs in 25 s without this
     * (0.914). */
    return move_budget_take(now);
}

/*
 * Whether the victim slab, idle since before `since` (when cls's oldest
 * unread new item joined probation), is colder memory than what cls would
 * drop of its own. Unbudgeted when no slab of the victim's class has been
 * touched since the oldest of cls's last ITEM_ARRIVALS new items arrived:
 * a class nobody uses any more beside one that keeps receiving (a shift of
 * value sizes, as in the seed experiment, whose phases last under a second;
 * on the mixed load every class is touched every few milliseconds). Else
 * the move is a judgement on ages that can be noise, and takes the budget.
 */
static bool
victim_colder(uint8_t cls, const struct slab_info *victim, uint64_t since)
{
    struct slab_class_times vt;
    uint64_t now = clock_now_ms();

    if (victim->accessed_ms >= since) {
        return false;
    }
    if (slab_class_times(victim->cls, &vt) &&
        vt.warmest_ms < item_class_arrived_ms(cls)) {
        return true;
    }
    return move_budget_take(now);
}

/*
 * While the class has new items nobody read waiting on probation, another
 * class's slab is colder memory only if nobody touched it since the oldest
 * of them arrived: at -m 64 on the mixed load every class's slabs were
 * touched within milliseconds of each other, the own-coldest-slab test
 * below moved 10,000 slabs in 25 s, and `lrc,lru` trailed `lru` (0.915
 * against 0.922); with this rule 0.921 (and the move budget of
 * victim_colder() on top).
 */
bool
evict_slab_wanted(uint8_t cls, uint32_t sid)
{
    struct slab_info victim;

    if (item_class_items(cls) == 0) {
        return true;            /* nothing of its own to reuse */
    }
    if (!slab_table_info(sid, &victim) || victim.cls == cls) {
        return false;           /* its own slab: item LRU is finer */
    }
    uint64_t since;
    if (item_probation_due(cls, &since)) {
        /* (A floor of a second of idleness held the mixed load's churn
         * down too, but stalled the seed experiment of `make check`.) */
        uint64_t now = clock_now_ms(), age = now > since ? now - since : 0;
        if (victim_colder(cls, &victim, since)) {
            return true;
        }
        return probation_balance(cls, victim.cls, age);
    }
    uint64_t own_coldest;
    if (!slab_class_coldest(cls, &own_coldest)) {
        return true;
    }
    return victim.accessed_ms <= own_coldest;
}

/*
 * A class's only slab, read or written within the last EVICT_LAST_SLAB_MS,
 * is not taken: the class would then have nothing of its own and take a
 * slab from the next class, and so on. Measured at -m 8 with five active
 * value sizes: ~11,000 slabs moved in 8 s and a hit ratio of 0.34 without
 * this, 0-849 and 0.73 with it (memcached 0.74; notes/eviction.md). The
 * policy picks another slab.
 */
bool
evict_slab_last_in_use(uint32_t sid)
{
    struct slab_info victim;

    if (!slab_table_info(sid, &victim) || victim.cls == 0 ||
        slab_class_slabs(victim.cls) > 1) {
        return false;
    }
    if (slab_first_past_limit()) {
        return true;            /* every class keeps its first slab */
    }
    return victim.accessed_ms + EVICT_LAST_SLAB_MS > clock_now_ms();
}

bool
evict_slab_last_other(uint32_t sid, uint8_t cls)
{
    struct slab_info victim;

    return slab_first_past_limit() && slab_table_info(sid, &victim) &&
           victim.cls != cls && evict_slab_last_in_use(sid);
}

uint8_t
evict_stubs_kept(void)
{
    uint8_t stubs = item_stub_class();

    if (stubs == 0) {
        return 0;
    }
    /* An index of dead stubs (their records reclaimed) is not worth
     * keeping; nor one past half of memory (values need RAM too). Read
     * once per choice: the live-record count takes the flash lock. */
    uint64_t used = flash_objects_used();
    if (used >= flash_records_live() ||
        used * item_stub_size() * 2 > slab_limit()) {
        return 0;
    }
    return stubs;
}

static bool
slab_kept_by(uint32_t sid, uint8_t cls, uint8_t kept)
{
    struct slab_info victim;

    if (evict_slab_last_other(sid, cls)) {
        return true;
    }
    return kept != 0 && cls != kept && slab_table_info(sid, &victim) && victim.cls == kept;
}

bool
evict_slab_kept(uint32_t sid, uint8_t cls)
{
    return slab_kept_by(sid, cls, evict_stubs_kept());
}

/* Whether the victim stays: another class's only slab under the first-slab
 * rule; without it, a gated policy's damping (the only slab of a class,
 * used within EVICT_LAST_SLAB_MS). */
static bool
evict_slab_spared(uint32_t sid, const struct evict_req *req)
{
    if (slab_first_past_limit()) {
        return evict_slab_kept(sid, req->cls);
    }
    return (req->damp && evict_slab_last_in_use(sid)) || evict_slab_kept(sid, req->cls);
}

bool
evict_undamp(struct evict_req *req)
{
    if (!req->damp || slab_class_slabs(req->cls) != 0) {
        return false;
    }
    req->damp = false;
    return true;
}

static bool
slab_owned_by(uint32_t sid, uint8_t cls)
{
    struct slab_info info;

    return slab_table_info(sid, &info) && info.cls == cls;
}

/*
 * The victim is a slab of the class asking: re-carving it for the same
 * class would gain nothing, and could rescue none of its read items (their
 * class's free chunks would have to come from the slab itself), so a class
 * holding one slab lost every item at each slab eviction (plain `lrc` at
 * -m 64 on the mixed load: 22 items kept in a 12 KB class where `lru` kept
 * 82). Its own memory is judged item by item instead: probation, then the
 * CLOCK hand (judging the slab's items in place measured 0.911 there, this
 * 0.920; notes/eviction.md). A class with nothing to judge re-carves it.
 */
static evict_rstatus_t
evict_slab_own(uint32_t sid, struct evict_req *req)
{
    uint32_t got = item_clock_pull(req->cls, true, req->batch);

    if (got == 0) {
        return EVICT_DECLINE;   /* nothing to judge: re-carved as before */
    }
    req->freed = got;
    req->sid = sid;
    return EVICT_OK;
}

/*
 * A plain slab-level policy picked another class's slab, but the asking
 * class has items of its own to judge. A slab touched since the oldest new
 * item nobody read on the class's probation arrived (with none waiting:
 * within the last EVICT_HOT_SLAB_MS) is warmer than what the class would
 * drop itself, and so is a colder one when victim_colder() says no (the
 * move budget is spent); then the class's own item goes instead
 * (probation, else the CLOCK hand; probation entries can all be busy).
 */
static bool
evict_own_first(uint32_t sid, struct evict_req *req)
{
    struct slab_info victim;
    uint64_t since;
    bool due;

    if (item_class_items(req->cls) == 0 || !slab_table_info(sid, &victim)) {
        return false;
    }
    due = item_probation_due(req->cls, &since);
    if (!due) {
        uint64_t now = clock_now_ms();
        since = now > EVICT_HOT_SLAB_MS ? now - EVICT_HOT_SLAB_MS : 0;
    }
    if (victim_colder(req->cls, &victim, since)) {
        return false;
    }
    uint32_t got = due ? item_probation_pull(req->cls, req->batch) : 0;
    if (got == 0) {
        got = item_clock_pull(req->cls, true, req->batch);
    }
    if (got == 0) {
        return false;
    }
    req->freed = got;
    req->sid = SLAB_ID_NONE;
    return true;
}

evict_rstatus_t
evict_slab(uint32_t sid, struct evict_req *req)
{
    if (req->gated && !evict_slab_wanted(req->cls, sid)) {
        return EVICT_DECLINE;
    }
    if (evict_slab_spared(sid, req)) {
        return EVICT_FAIL;
    }
    if (slab_owned_by(sid, req->cls) && evict_slab_own(sid, req) == EVICT_OK) {
        return EVICT_OK;
    }
    if (!req->gated && !req->others_only && evict_own_first(sid, req)) {
        return EVICT_OK;
    }
    switch (item_slab_evict(sid, req->cls)) {
    case ITEM_SLAB_OK:
        req->freed = slab_class_perslab(req->cls);
        req->sid = sid;
        return EVICT_OK;
    case ITEM_SLAB_BUSY:
        atomic_fetch_add_explicit(&skipped_busy, 1, memory_order_relaxed);
        return EVICT_FAIL;
    case ITEM_SLAB_UNOWNED:
        break;
    }
    return EVICT_FAIL;
}

static bool
sid_tried(const uint32_t *tried, int n, uint32_t sid)
{
    for (int i = 0; i < n; i++) {
        if (tried[i] == sid) {
            return true;
        }
    }
    return false;
}

/* O(slabs) scan: one per slab evicted, i.e. per slab-size of writes. */
static evict_rstatus_t
slab_oldest_pass(struct evict_req *req,
                 uint64_t (*age_key)(const struct slab_info *))
{
    uint8_t cls = req->cls;
    uint32_t tried[EVICT_PICKS];
    uint32_t n = slab_table_count();
    uint8_t kept = evict_stubs_kept();

    for (int pick = 0; pick < EVICT_PICKS; pick++) {
        uint32_t best = SLAB_ID_NONE;
        uint64_t best_key = UINT64_MAX;
        bool best_own = false;
        for (uint32_t sid = 0; sid < n; sid++) {
            struct slab_info info;
            if (!slab_table_info(sid, &info) || info.cls == 0 ||
                (req->others_only && info.cls == cls) ||
                sid_tried(tried, pick, sid) ||
                slab_kept_by(sid, cls, kept)) {
                continue;       /* another class's only slab stays, stubs too */
            }
            uint64_t key = age_key(&info);
            bool own = info.cls == cls;
            /* On a tie, take memory from another class: cls gains. */
            if (best == SLAB_ID_NONE || key < best_key ||
                (key == best_key && best_own && !own)) {
                best = sid;
                best_key = key;
                best_own = own;
            }
        }
        if (best == SLAB_ID_NONE) {
            break;
        }
        evict_rstatus_t st = evict_slab(best, req);
        if (st != EVICT_FAIL) {
            return st;
        }
        tried[pick] = best;
    }
    return EVICT_FAIL;
}

/*
 * A spared slab (damping) uses up a pick like a busy one, which keeps the
 * rule-2 gate looking at the oldest slab (measured: skipping spared slabs
 * instead let the gate approve younger victims, and -m 8 went from 0.73
 * to 0.66). If all picks were spared and cls holds no slab at all, one
 * more pass without damping.
 */
evict_rstatus_t
evict_slab_oldest(struct evict_req *req,
                  uint64_t (*age_key)(const struct slab_info *))
{
    evict_rstatus_t st = slab_oldest_pass(req, age_key);

    if (st == EVICT_FAIL && evict_undamp(req)) {
        st = slab_oldest_pass(req, age_key);
    }
    return st;
}

static uint64_t
accessed_key(const struct slab_info *s)
{
    return s->accessed_ms;
}

evict_rstatus_t
evict_slab_for(uint8_t cls)
{
    struct evict_req req = { .cls = cls, .gated = false, .damp = false, .batch = 1,
                             .others_only = true };
    evict_rstatus_t st = evict_slab_oldest(&req, accessed_key);

    if (st == EVICT_OK) {
        atomic_store(&given_sid, req.sid);
        atomic_store(&given_until_ms, clock_now_ms() + EVICT_LAST_SLAB_MS);
    }
    return st;
}

uint64_t
evict_skipped_busy(void)
{
    return atomic_load(&skipped_busy);
}

uint64_t
evict_random(void)
{
    static _Thread_local uint64_t state;

    if (state == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        /* Distinct per thread even when threads start in the same ns. */
        state = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
                (atomic_fetch_add(&seed_salt, 1) + 1) * 0x9e3779b97f4a7c15ull;
        if (state == 0) {
            state = 0x2545f4914f6cdd1dull;
        }
    }
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545f4914f6cdd1dull;
}
