/* kafkalite.network._pools: give the operating system back the empty pools that CPython's
 * small-object allocator keeps inside arenas still in use (docs/decisions/0074).
 *
 * CPython takes objects of 512 bytes or less from 16 KiB pools carved out of 1 MiB arenas
 * (256 KiB arenas and 4 KiB pools on builds without the radix tree). An arena goes back to the
 * operating system only once every pool in it is empty; an empty pool inside an arena that
 * still holds one live object stays resident for as long as the arena lives. After a burst of
 * connections closes, that is most of what the burst took (decision 0067).
 *
 * At import this module wraps the arena allocator (PyObject_SetArenaAllocator, public API): the
 * wrapper calls the allocator it replaced and keeps the address of every arena allocated from
 * then on, dropping it when the arena is freed. release() visits those arenas and, for every
 * pool whose header says it holds no block, marks the pool as never used (its size class set to
 * the allocator's "fresh pool" value, so that the next use initialises it from scratch instead
 * of following the free list left in its body) and gives back every page of the pool but the
 * first, which holds the header and the link of the arena's list of free pools
 * (madvise(MADV_DONTNEED): the pages read as zeros when touched again).
 *
 * The pool header is CPython's private struct pool_header, unchanged from 3.8 to 3.13. Before
 * changing anything, release() checks every carved pool of every arena against what that
 * layout implies (size class in range, the offsets the size class gives, the block count
 * within the pool, one arena index per arena); one pool that does not fit, or an arena
 * allocator installed after this one (which would free arenas this one never hears of), and the
 * module changes nothing, now or later, and says why. It runs with the GIL held, as every call into
 * the allocator does, so no pool changes state while it looks.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* CPython's pool header, field for field. */
typedef struct pool_head {
    union {
        void *padding;
        unsigned int count; /* blocks allocated from the pool */
    } ref;
    void *freeblock;
    struct pool_head *nextpool;
    struct pool_head *prevpool;
    unsigned int arenaindex;
    unsigned int szidx;        /* size class; FRESH_POOL for a pool never used */
    unsigned int nextoffset;   /* offset of the first block never handed out */
    unsigned int maxnextoffset;
} pool_head;

#define FRESH_POOL 0xffffu
#define ALIGN 16u            /* 64-bit builds since 3.8 */
#define SIZE_CLASSES 32u     /* 512 bytes / ALIGN */
#define POOL_OVERHEAD ((sizeof(pool_head) + ALIGN - 1) / ALIGN * ALIGN)

static PyObjectArenaAllocator wrapped;
static uintptr_t *arenas;
static size_t n_arenas, cap_arenas;
static int broken;           /* a layout check failed: release() does nothing any more */
static char broken_reason[200];

/* What goes through the arena allocator: CPython's arenas (1 MiB on 64-bit builds since 3.10,
 * with 16 KiB pools) and, since 3.11, the chunks of each thread's frame stack (16 KiB, doubled
 * only for a frame that would not fit: one of 1 MiB would need a single frame of over 512 KiB,
 * 65,000 slots). Only blocks of an arena's size are kept; builds with 256 KiB arenas have 4 KiB
 * pools, a pool a page, and nothing to give back. */
#define ARENA_SIZE ((size_t)1 << 20)
#define POOL_SIZE ((size_t)1 << 14)

static void *
arena_alloc(void *ctx, size_t size)
{
    void *p = wrapped.alloc(wrapped.ctx, size);
    (void)ctx;
    if (p == NULL || size != ARENA_SIZE)
        return p;
    if (n_arenas == cap_arenas) {
        size_t cap = cap_arenas ? cap_arenas * 2 : 256;
        uintptr_t *grown = realloc(arenas, cap * sizeof(uintptr_t));
        if (grown == NULL)
            return p; /* not tracked: simply never visited */
        arenas = grown;
        cap_arenas = cap;
    }
    arenas[n_arenas++] = (uintptr_t)p;
    return p;
}

static void
arena_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    for (size_t i = 0; i < n_arenas; i++) {
        if (arenas[i] == (uintptr_t)p) {
            arenas[i] = arenas[--n_arenas];
            break;
        }
    }
    wrapped.free(wrapped.ctx, p, size);
}

#define MAX_ARENA_PAGES 256u

/* The page size, or 0 when a pool is a single page or an arena has more pages than a residency
 * vector holds (nothing to give back, nothing to count). */
static size_t
usable_page_size(void)
{
    size_t page_size = (size_t)sysconf(_SC_PAGESIZE);
    if (POOL_SIZE <= page_size || ARENA_SIZE / page_size > MAX_ARENA_PAGES)
        return 0;
    return page_size;
}

/* Arena number a's pools, from `first` (CPython aligns the first to the pool size) to `end`,
 * and in vec one byte a page from `first` (bit 0: resident); 0 when mincore fails. */
static int
arena_pools(size_t a, uintptr_t *first, uintptr_t *end, unsigned char *vec)
{
    *first = (arenas[a] + POOL_SIZE - 1) & ~(uintptr_t)(POOL_SIZE - 1);
    *end = arenas[a] + ARENA_SIZE;
    return mincore((void *)*first, *end - *first, vec) == 0;
}

/* How many of the `count` pages from page `from` the residency vector says are resident. */
static size_t
resident(const unsigned char *vec, size_t from, size_t count)
{
    size_t held = 0;
    for (size_t i = from; i < from + count; i++)
        held += vec[i] & 1;
    return held;
}

/* 1 when the pool at p looks like one CPython carved, 0 when it was never carved (all zeros),
 * -1 (reason set) when it fits neither. */
static int
check_pool(const pool_head *p, unsigned int *arena_index, int *first)
{
    if (p->maxnextoffset == 0 && p->nextoffset == 0 && p->szidx == 0 && p->ref.count == 0)
        return 0;
    unsigned int cls = p->szidx;
    if (cls == FRESH_POOL) {
        if (p->ref.count != 0)
            goto bad;
    }
    else {
        size_t size = (cls + 1) * ALIGN;
        if (cls >= SIZE_CLASSES || p->maxnextoffset != POOL_SIZE - size
            || p->nextoffset > POOL_SIZE || p->nextoffset < POOL_OVERHEAD + size
            || p->ref.count > (POOL_SIZE - POOL_OVERHEAD) / size)
            goto bad;
    }
    if (*first) {
        *arena_index = p->arenaindex;
        *first = 0;
    }
    else if (p->arenaindex != *arena_index)
        goto bad;
    return 1;
bad:
    snprintf(broken_reason, sizeof broken_reason,
             "pool %p does not fit CPython's pool header: count %u, size class %u, "
             "offsets %u/%u, arena index %u",
             (const void *)p, p->ref.count, p->szidx, p->nextoffset, p->maxnextoffset,
             p->arenaindex);
    return -1;
}

static PyObject *
release(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (!broken) {
        /* replaced since import: arenas freed from then on are not forgotten, and an address
         * kept may be mapped by something else now */
        PyObjectArenaAllocator current;
        PyObject_GetArenaAllocator(&current);
        if (current.alloc != arena_alloc || current.free != arena_free) {
            broken = 1;
            snprintf(broken_reason, sizeof broken_reason,
                     "the arena allocator was replaced after kafkalite.network._pools was imported");
        }
    }
    if (broken) {
        PyErr_SetString(PyExc_RuntimeError, broken_reason);
        return NULL;
    }
    size_t page_size = usable_page_size();
    if (page_size == 0)
        return Py_BuildValue("(nnn)", (Py_ssize_t)n_arenas, (Py_ssize_t)0, (Py_ssize_t)0);
    size_t pages_per_pool = POOL_SIZE / page_size;
    unsigned char vec[MAX_ARENA_PAGES];

    /* every carved pool is checked before any is changed */
    for (size_t a = 0; a < n_arenas; a++) {
        uintptr_t first, end;
        unsigned int index = 0;
        int first_pool = 1;
        if (!arena_pools(a, &first, &end, vec))
            continue;
        for (uintptr_t pool = first; pool + POOL_SIZE <= end; pool += POOL_SIZE) {
            if (!(vec[(pool - first) / page_size] & 1))
                continue; /* never carved: its header was never written */
            if (check_pool((const pool_head *)pool, &index, &first_pool) < 0) {
                broken = 1;
                PyErr_SetString(PyExc_RuntimeError, broken_reason);
                return NULL;
            }
        }
    }

    Py_ssize_t pools = 0, bytes = 0;
    for (size_t a = 0; a < n_arenas; a++) {
        uintptr_t first, end;
        if (!arena_pools(a, &first, &end, vec))
            continue;
        for (uintptr_t pool = first; pool + POOL_SIZE <= end; pool += POOL_SIZE) {
            size_t page = (pool - first) / page_size;
            if (!(vec[page] & 1))
                continue;
            pool_head *p = (pool_head *)pool;
            if (p->ref.count != 0 || p->maxnextoffset == 0)
                continue;
            size_t held = resident(vec, page + 1, pages_per_pool - 1);
            p->szidx = FRESH_POOL; /* the next use initialises it, reading nothing of its body */
            if (held == 0)
                continue; /* given back before and untouched since */
            if (madvise((void *)(pool + page_size), POOL_SIZE - page_size, MADV_DONTNEED) != 0)
                continue;
            pools += 1;
            bytes += (Py_ssize_t)(held * page_size);
        }
    }
    return Py_BuildValue("(nnn)", (Py_ssize_t)n_arenas, pools, bytes);
}

static PyObject *
census(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    size_t page_size = usable_page_size();
    if (page_size == 0)
        return Py_BuildValue("{}");
    unsigned char vec[MAX_ARENA_PAGES];
    size_t pages_per_pool = POOL_SIZE / page_size;
    Py_ssize_t resident_pages = 0, empty = 0, empty_pages = 0, used = 0, used_pages = 0;
    for (size_t a = 0; a < n_arenas; a++) {
        uintptr_t first, end;
        if (!arena_pools(a, &first, &end, vec))
            continue;
        for (uintptr_t pool = first; pool + POOL_SIZE <= end; pool += POOL_SIZE) {
            size_t page = (pool - first) / page_size;
            size_t held = resident(vec, page, pages_per_pool);
            resident_pages += (Py_ssize_t)held;
            if (!(vec[page] & 1))
                continue;
            const pool_head *p = (const pool_head *)pool;
            if (p->maxnextoffset == 0)
                continue;
            if (p->ref.count == 0) {
                empty += 1;
                empty_pages += (Py_ssize_t)held;
            }
            else {
                used += 1;
                used_pages += (Py_ssize_t)held;
            }
        }
    }
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n}", "arenas", (Py_ssize_t)n_arenas,
                         "page_size", (Py_ssize_t)page_size, "resident_pages", resident_pages,
                         "empty_pools", empty, "empty_pool_pages", empty_pages, "used_pools",
                         used, "used_pool_pages", used_pages);
}

static PyObject *
tracked_arenas(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromSize_t(n_arenas);
}

static PyMethodDef methods[] = {
    {"release", release, METH_NOARGS,
     "release() -> (arenas, pools, bytes): give back the pages of the empty pools in the arenas "
     "allocated since import (all but each pool's first page); RuntimeError when a pool does "
     "not fit CPython's layout, and then on every later call."},
    {"census", census, METH_NOARGS,
     "census() -> dict: over the arenas allocated since import, the resident pages, and the "
     "empty and used pools with the resident pages of each kind (read only)."},
    {"tracked_arenas", tracked_arenas, METH_NOARGS,
     "tracked_arenas() -> int: arenas allocated since import and not yet freed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pools", NULL, -1, methods,
};

PyMODINIT_FUNC
PyInit__pools(void)
{
#if SIZEOF_VOID_P != 8
    PyErr_SetString(PyExc_ImportError, "_pools supports 64-bit builds only");
    return NULL;
#else
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    static int installed;
    if (!installed) {
        PyObjectArenaAllocator ours = {NULL, arena_alloc, arena_free};
        PyObject_GetArenaAllocator(&wrapped);
        PyObject_SetArenaAllocator(&ours);
        installed = 1;
    }
    return m;
#endif
}
