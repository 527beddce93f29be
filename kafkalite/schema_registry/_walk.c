/* kafkalite.schema_registry._walk: the produce validator's record walk in C.
 *
 * Two functions.
 *
 * prefixes(data, parts, distinct), over one batch's decompressed records area (any contiguous
 * buffer), reads the records exactly as validation.record_prefixes does, a lenient consumer's
 * (librdkafka's) way:
 *   - records follow one another by their length varints until the area ends, whatever count
 *     the batch header declares;
 *   - a record's fields are read from its start: the attributes byte, the timestamp and offset
 *     deltas (varints skipped by their continuation bits, any width), the key's length (a
 *     zig-zag varint), in value mode the key skipped by its length, then the value's length;
 *     a field may run past its record's length (the next record still starts where that
 *     length says), never past the area;
 *   - a part's prefix is its first 5 bytes (fewer when it is shorter), None when its length is
 *     negative (null); the headers are never read.
 * A record cannot be read when a length varint is truncated or longer than 5 bytes, the
 * record's length is negative or runs past the area, a varint runs into the area's end, or a
 * part's prefix (in value mode: the byte after the key) lies beyond it. The walk stops there.
 * It returns (keys, values, count, reason): keys and values are None for a part not asked for
 * (parts: 1 key, 2 value, 3 both), else a set of the distinct prefixes (distinct true) or a
 * list with one entry per record read; count is the number of records read; reason is None
 * when the whole area was read, else why record `count` could not be.
 *
 * request(data, parts), over a whole partition's produce data (the batches one after
 * another), gives what validation.native_prefixes gives from validation._records_areas and
 * prefixes(): it reads the batch headers as _records_areas does (a batch every batchLength +
 * 12 bytes while 12 bytes are left; 61 of them must be there, and batchLength + 12 must be at
 * least 61; the records area runs from byte 61 to the batch's end or the data's, whichever
 * comes first; control batches skipped; the magic byte and the CRC not read: the append
 * checks them) and walks each uncompressed area into one pair of tables. It returns None when
 * a header cannot be read or some record cannot be, else (keys, values, compressed): the
 * distinct prefixes of the parts asked for (sets, None for a part not asked for), and None or
 * a list of (codec, start, end) for the compressed batches' areas, which the caller
 * decompresses and walks with prefixes().
 *
 * The common path builds no object per record: each distinct prefix becomes one bytes object
 * (kept in a small open-addressing table keyed by the prefix packed into an integer), and a
 * list holds references to those. A record whose head lies well inside the area (at least
 * SAFE bytes before its end) is read by fast_record, a few word loads and no per-byte bounds
 * checks, when its varints are of the common widths; any other record (near the end, long or
 * damaged varints, a key past the area) by slow_record, byte by byte with every read
 * bounds-checked. fast_record declines rather than decides anything slow_record would decide
 * otherwise, so both read every record alike. Positions are kept as differences from the end
 * so no sum can overflow.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define PREFIX 5
#define SMALL 16

#define LOG_OVERHEAD 12      /* baseOffset and batchLength */
#define LENGTH_OFFSET 8      /* batchLength, int32 big-endian */
#define ATTRIBUTES_OFFSET 21 /* attributes, int16 big-endian */
#define RECORDS_OFFSET 61    /* the records area, after the 61-byte header */
#define CONTROL_FLAG 0x20
#define CODEC_MASK 0x07

#if defined(__GNUC__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#define NOINLINE
#define ALWAYS_INLINE inline
#endif

/* fast_record reads little-endian words with GCC's builtins; elsewhere every record takes
 * slow_record. */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FAST_RECORDS 1
#else
#define FAST_RECORDS 0
#endif

/* A record's head is read by fast_record only when this many bytes of the area are left from
 * its start: its reads reach at most 2 (length) + 1 (attributes) + 8 (the deltas' window) +
 * 2 (key length) + 5 (key prefix) = 18 bytes in. */
#define SAFE 32

/* What the record readers give instead of the next record's position (which is above 0) */
#define DECLINED 0      /* fast_record: not a record it reads */
#define UNREADABLE (-1) /* slow_record: the record cannot be read */
#define FAILED (-2)     /* out of memory */

/* last_le of a table whose last prefix is not PREFIX bytes long: no 5-byte prefix packs to it */
#define NOT_FULL (UINT64_C(1) << 63)

/* The distinct prefixes of one part: packed key -> bytes object (a strong reference). A key is
 * (length + 1) << 40 | the bytes big-endian in the low 40 bits, so 0 marks an empty slot. */
typedef struct {
    uint64_t *keys;
    PyObject **objs;
    Py_ssize_t cap; /* a power of two */
    Py_ssize_t used;
    uint64_t last_key; /* the previous record's prefix: a batch mostly repeats one */
    PyObject *last_obj;
    uint64_t last_le; /* last_key's bytes as le5() packs them, or NOT_FULL */
    int saw_null;
    uint64_t small_keys[SMALL];
    PyObject *small_objs[SMALL];
} table;

/* The 5 bytes at p in the low 40 bits of an integer (host order: only compared with itself). */
static ALWAYS_INLINE uint64_t
le5(const unsigned char *p)
{
    uint32_t head; /* two loads, not a copy into a zeroed word (whose reload would stall) */
    memcpy(&head, p, sizeof head);
    return (uint64_t)head | (uint64_t)p[4] << 32;
}

static void
table_init(table *t)
{
    memset(t->small_keys, 0, sizeof(t->small_keys));
    t->keys = t->small_keys;
    t->objs = t->small_objs;
    t->cap = SMALL;
    t->used = 0;
    t->last_key = 0;
    t->last_obj = NULL;
    t->last_le = NOT_FULL;
    t->saw_null = 0;
}

static void
table_free(table *t)
{
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        if (t->keys[i]) {
            Py_DECREF(t->objs[i]);
        }
    }
    if (t->keys != t->small_keys) {
        PyMem_Free(t->keys);
        PyMem_Free(t->objs);
    }
}

static inline Py_ssize_t
slot_of(uint64_t key, Py_ssize_t cap)
{
    return (Py_ssize_t)((key * 0x9E3779B97F4A7C15ULL) >> 32) & (cap - 1);
}

static int
table_grow(table *t)
{
    Py_ssize_t cap = t->cap * 2;
    uint64_t *keys = PyMem_Calloc((size_t)cap, sizeof(uint64_t));
    PyObject **objs = PyMem_Calloc((size_t)cap, sizeof(PyObject *));
    if (keys == NULL || objs == NULL) {
        PyMem_Free(keys);
        PyMem_Free(objs);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        if (t->keys[i]) {
            Py_ssize_t j = slot_of(t->keys[i], cap);
            while (keys[j]) {
                j = (j + 1) & (cap - 1);
            }
            keys[j] = t->keys[i];
            objs[j] = t->objs[i];
        }
    }
    if (t->keys != t->small_keys) {
        PyMem_Free(t->keys);
        PyMem_Free(t->objs);
    }
    t->keys = keys;
    t->objs = objs;
    t->cap = cap;
    return 0;
}

static inline void
table_remember(table *t, uint64_t key, PyObject *obj, const unsigned char *p, Py_ssize_t n)
{
    t->last_key = key;
    t->last_obj = obj;
    t->last_le = n == PREFIX ? le5(p) : NOT_FULL;
}

/* The bytes object of the prefix p[0:n] (n <= PREFIX), made on its first sight; a borrowed
 * reference (the table owns it), NULL with an exception set when out of memory. */
static NOINLINE PyObject *
table_get(table *t, const unsigned char *p, Py_ssize_t n)
{
    uint64_t key = (uint64_t)(n + 1) << 40;
    for (Py_ssize_t i = 0; i < n; i++) {
        key |= (uint64_t)p[i] << (8 * (PREFIX - 1 - i));
    }
    if (key == t->last_key) {
        return t->last_obj;
    }
    Py_ssize_t i = slot_of(key, t->cap);
    while (t->keys[i]) {
        if (t->keys[i] == key) {
            table_remember(t, key, t->objs[i], p, n);
            return t->objs[i];
        }
        i = (i + 1) & (t->cap - 1);
    }
    if ((t->used + 1) * 2 > t->cap) {
        if (table_grow(t) < 0) {
            return NULL;
        }
        i = slot_of(key, t->cap);
        while (t->keys[i]) {
            i = (i + 1) & (t->cap - 1);
        }
    }
    PyObject *obj = PyBytes_FromStringAndSize((const char *)p, n);
    if (obj == NULL) {
        return NULL;
    }
    t->keys[i] = key;
    t->objs[i] = obj;
    t->used++;
    table_remember(t, key, obj, p, n);
    return obj;
}

/* The prefix p[0:PREFIX]: the previous record's again (one compare), else from the table. */
static ALWAYS_INLINE PyObject *
table_get5(table *t, const unsigned char *p)
{
    if (LIKELY(le5(p) == t->last_le)) {
        return t->last_obj;
    }
    return table_get(t, p, PREFIX);
}

/* A set of the table's prefixes, None among them when a null was seen. */
static PyObject *
table_set(table *t)
{
    PyObject *set = PySet_New(NULL);
    if (set == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        if (t->keys[i] && PySet_Add(set, t->objs[i]) < 0) {
            Py_DECREF(set);
            return NULL;
        }
    }
    if (t->saw_null && PySet_Add(set, Py_None) < 0) {
        Py_DECREF(set);
        return NULL;
    }
    return set;
}

/* read_varint's encodings of 2-5 bytes (d[*at] exists and has its high bit set). */
static NOINLINE int
read_long_varint(const unsigned char *d, Py_ssize_t limit, Py_ssize_t *at, int64_t *value,
                 const char **why)
{
    Py_ssize_t p = *at;
    unsigned char b = d[p];
    uint32_t raw = b & 0x7F;
    for (int shift = 7; shift <= 28; shift += 7) {
        p++;
        if (p >= limit) {
            *why = "a varint runs past the records";
            return 0;
        }
        b = d[p];
        if (shift == 28) {
            if (b >= 0x80) {
                *why = "a varint longer than 5 bytes";
                return 0;
            }
            raw |= (uint32_t)b << 28; /* the bits beyond 32 dropped, as Java's int does */
            break;
        }
        if (b < 0x80) {
            raw |= (uint32_t)b << shift;
            break;
        }
        raw |= (uint32_t)(b & 0x7F) << shift;
    }
    *value = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    *at = p + 1;
    return 1;
}

/* A zig-zag int32 varint at d[*at] (Kafka's readVarint: at most 5 bytes, the bits beyond 32
 * dropped); 0 with *why set when it is truncated or over-long. */
static inline int
read_varint(const unsigned char *d, Py_ssize_t limit, Py_ssize_t *at, int64_t *value,
            const char **why)
{
    Py_ssize_t p = *at;
    if (LIKELY(p < limit && d[p] < 0x80)) { /* one byte: almost every length */
        unsigned char b = d[p];
        *value = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        *at = p + 1;
        return 1;
    }
    if (LIKELY(limit - p >= 2 && d[p + 1] < 0x80)) { /* two bytes: lengths of 64-8,191 */
        uint32_t raw = (uint32_t)(d[p] & 0x7F) | (uint32_t)d[p + 1] << 7;
        *value = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        *at = p + 2;
        return 1;
    }
    if (p >= limit) {
        *why = "a varint runs past the records";
        return 0;
    }
    return read_long_varint(d, limit, at, value, why);
}

/* Past a varint of any width (its continuation bits only); 0 when it runs into the end. */
static inline int
skip_varint(const unsigned char *d, Py_ssize_t limit, Py_ssize_t *at)
{
    Py_ssize_t p = *at;
    if (LIKELY(p < limit && !(d[p] & 0x80))) {
        *at = p + 1;
        return 1;
    }
    while (p < limit && (d[p] & 0x80)) {
        p++;
    }
    if (p >= limit) {
        return 0;
    }
    *at = p + 1;
    return 1;
}

/* One part's prefix at d[at] of a part `size` long: *obj a borrowed reference (Py_None for a
 * null part); 0 with *why set when the prefix lies past the area, -1 when out of memory. */
static inline int
prefix_of(table *t, const unsigned char *d, Py_ssize_t limit, Py_ssize_t at, int64_t size,
          PyObject **obj, const char **why, const char *past)
{
    if (size < 0) {
        t->saw_null = 1;
        *obj = Py_None;
        return 1;
    }
    Py_ssize_t n = size < PREFIX ? (Py_ssize_t)size : PREFIX;
    if (n > limit - at) {
        *why = past;
        return 0;
    }
    *obj = n == PREFIX ? table_get5(t, d + at) : table_get(t, d + at, n);
    return *obj == NULL ? -1 : 1;
}

/* The record at d[at], every read bounds-checked: the next record's position with *key /
 * *value set (the parts asked for), UNREADABLE with *why set when it cannot be read, FAILED
 * when out of memory. */
static NOINLINE Py_ssize_t
slow_record(const unsigned char *d, Py_ssize_t limit, Py_ssize_t at, table *key_table,
            table *value_table, int want_key, int want_value, PyObject **key, PyObject **value,
            const char **why)
{
    int64_t length, key_size, value_size;
    if (!read_varint(d, limit, &at, &length, why)) {
        return UNREADABLE;
    }
    if (length < 0 || length > limit - at) {
        *why = "a record's length runs past the records";
        return UNREADABLE;
    }
    const Py_ssize_t end = at + (Py_ssize_t)length;
    if (limit - at < 2) { /* the attributes byte, then at least the timestamp's */
        *why = "a record's head runs past the records";
        return UNREADABLE;
    }
    at += 1;
    if (!skip_varint(d, limit, &at) || !skip_varint(d, limit, &at)) {
        *why = "a record's head runs past the records";
        return UNREADABLE;
    }
    if (!read_varint(d, limit, &at, &key_size, why)) {
        return UNREADABLE;
    }
    int ok;
    if (want_key) {
        ok = prefix_of(key_table, d, limit, at, key_size, key, why,
                       "a key runs past the records");
        if (ok <= 0) {
            return ok < 0 ? FAILED : UNREADABLE;
        }
    }
    if (want_value) {
        Py_ssize_t v = at;
        if (key_size > 0) {
            if (key_size >= limit - v) {
                *why = "a key runs past the records";
                return UNREADABLE;
            }
            v += (Py_ssize_t)key_size;
        }
        if (!read_varint(d, limit, &v, &value_size, why)) {
            return UNREADABLE;
        }
        ok = prefix_of(value_table, d, limit, v, value_size, value, why,
                       "a value runs past the records");
        if (ok <= 0) {
            return ok < 0 ? FAILED : UNREADABLE;
        }
    }
    return end;
}

#if FAST_RECORDS
static ALWAYS_INLINE uint64_t
load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A varint of 1 or 2 bytes at q (2 bytes readable): its raw bits (the zig-zag undone by the
 * caller: odd bits are a negative value, even ones the value twice), its width in *width;
 * 0 when it has more bytes. */
static ALWAYS_INLINE int
read12(const unsigned char *q, Py_ssize_t *width, uint32_t *raw)
{
    const uint32_t b0 = q[0];
    if (LIKELY(b0 < 0x80)) {
        *raw = b0;
        *width = 1;
        return 1;
    }
    const uint32_t b1 = q[1];
    if (LIKELY(b1 < 0x80)) {
        *raw = (b0 & 0x7F) | b1 << 7;
        *width = 2;
        return 1;
    }
    return 0;
}

/* The prefix of a part whose length's raw bits are `raw` (read12), at p: Py_None for a null
 * part (a negative length), NULL when out of memory. */
static ALWAYS_INLINE PyObject *
part_prefix(table *t, const unsigned char *p, uint32_t raw)
{
    if (UNLIKELY(raw & 1)) {
        t->saw_null = 1;
        return Py_None;
    }
    const Py_ssize_t size = (Py_ssize_t)(raw >> 1);
    if (LIKELY(size >= PREFIX)) {
        const uint64_t bytes = le5(p);
        if (LIKELY(bytes == t->last_le)) {
            return t->last_obj; /* the previous record's prefix again */
        }
        return table_get(t, p, PREFIX);
    }
    return table_get(t, p, size);
}

/* The record at d[at] (at least SAFE bytes before the area's end) when its length and its
 * parts' lengths are varints of 1 or 2 bytes and its deltas end within 8 bytes of its
 * attributes: the next record's position with *key / *value set, as slow_record would give
 * them; DECLINED when it declines (slow_record then reads the record from the same place, and
 * says why when it cannot), FAILED when out of memory. Every read is within SAFE bytes of at
 * except the value's length and prefix, which are checked. */
static ALWAYS_INLINE Py_ssize_t
fast_record(const unsigned char *d, Py_ssize_t limit, const Py_ssize_t at, table *key_table,
            table *value_table, const int want_key, const int want_value, PyObject **key,
            PyObject **value)
{
    /* the length: the next record's position waits on it alone, so its sign is a separate
     * (predicted) test and not on that path */
    const uint32_t b0 = d[at];
    uint32_t raw;
    Py_ssize_t p;
    if (LIKELY(b0 < 0x80)) {
        raw = b0;
        p = at + 1;
    }
    else {
        const uint32_t b1 = d[at + 1];
        if (UNLIKELY(b1 >= 0x80)) {
            return DECLINED;
        }
        raw = (b0 & 0x7F) | b1 << 7;
        p = at + 2;
    }
    const Py_ssize_t length = (Py_ssize_t)(raw >> 1);
    if (UNLIKELY(raw & 1) || UNLIKELY(length > limit - p)) {
        return DECLINED; /* a negative length, or one past the end */
    }
    const Py_ssize_t end = p + length;
    /* d[p] is the attributes byte; the timestamp and offset deltas follow: the bytes without
     * a continuation bit end them, the second of those the offset delta */
    uint64_t stops = ~load64(d + p + 1) & UINT64_C(0x8080808080808080);
    stops &= stops - 1;
    if (UNLIKELY(!stops)) {
        return DECLINED;
    }
    Py_ssize_t k = p + 2 + (Py_ssize_t)(__builtin_ctzll(stops) >> 3);
    Py_ssize_t width;
    uint32_t key_raw;
    if (UNLIKELY(!read12(d + k, &width, &key_raw))) {
        return DECLINED;
    }
    k += width;
    if (want_key) {
        *key = part_prefix(key_table, d + k, key_raw);
        if (UNLIKELY(*key == NULL)) {
            return FAILED;
        }
    }
    if (want_value) {
        /* past the key (none when null); slow_record refuses a key that leaves no byte
         * after it, and this declines it with everything else that leaves less than the
         * value's length (2 bytes) and prefix */
        Py_ssize_t v = k + (Py_ssize_t)((key_raw >> 1) & ((key_raw & 1) - 1));
        uint32_t value_raw;
        if (UNLIKELY(limit - v < 2 + PREFIX) || UNLIKELY(!read12(d + v, &width, &value_raw))) {
            return DECLINED;
        }
        *value = part_prefix(value_table, d + v + width, value_raw);
        if (UNLIKELY(*value == NULL)) {
            return FAILED;
        }
    }
    return end;
}
#endif

/* Walks one records area d[0:limit] into the tables (and the lists, when not NULL): 1 when
 * every record was read, 0 with *why set when record *count could not be, -1 with an
 * exception set. Inlined with constant parts, so each caller's loop has only its own work. */
static ALWAYS_INLINE int
walk_area(const unsigned char *d, const Py_ssize_t limit, table *key_table, table *value_table,
          const int want_key, const int want_value, const int listing, PyObject *key_list,
          PyObject *value_list, Py_ssize_t *count, const char **why)
{
    Py_ssize_t at = 0;
    Py_ssize_t n = *count;
    int ok = 1;
    while (at < limit) {
        PyObject *key = NULL, *value = NULL;
        Py_ssize_t next = DECLINED;
#if FAST_RECORDS
        if (LIKELY(limit - at >= SAFE)) {
            next = fast_record(d, limit, at, key_table, value_table, want_key, want_value, &key,
                               &value);
        }
#endif
        if (next == DECLINED) {
            next = slow_record(d, limit, at, key_table, value_table, want_key, want_value, &key,
                               &value, why);
        }
        if (next < 0) {
            ok = next == UNREADABLE ? 0 : -1;
            break;
        }
        if (listing && want_key && PyList_Append(key_list, key) < 0) {
            ok = -1;
            break;
        }
        if (listing && want_value && PyList_Append(value_list, value) < 0) {
            ok = -1;
            break;
        }
        at = next;
        n++;
    }
    *count = n;
    return ok;
}

#define WALKER(name, key, value, listing)                                                      \
    static int name(const unsigned char *d, Py_ssize_t limit, table *kt, table *vt,             \
                    PyObject *kl, PyObject *vl, Py_ssize_t *count, const char **why)            \
    {                                                                                            \
        return walk_area(d, limit, kt, vt, key, value, listing, kl, vl, count, why);            \
    }
WALKER(distinct_keys, 1, 0, 0)
WALKER(distinct_values, 0, 1, 0)
WALKER(distinct_both, 1, 1, 0)
WALKER(list_keys, 1, 0, 1)
WALKER(list_values, 0, 1, 1)
WALKER(list_both, 1, 1, 1)

typedef int (*walker)(const unsigned char *, Py_ssize_t, table *, table *, PyObject *,
                      PyObject *, Py_ssize_t *, const char **);

/* The walk for `parts` (1 key, 2 value, 3 both), into the lists (listing) or the tables only. */
static walker
walker_of(int parts, int listing)
{
    static const walker walkers[2][3] = {
        {distinct_keys, distinct_values, distinct_both},
        {list_keys, list_values, list_both},
    };
    if (parts < 1 || parts > 3) {
        PyErr_SetString(PyExc_ValueError, "parts is 1 (key), 2 (value) or 3 (both)");
        return NULL;
    }
    return walkers[listing ? 1 : 0][parts - 1];
}

static PyObject *
walk_prefixes(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    int parts, distinct;
    if (!PyArg_ParseTuple(args, "y*ip:prefixes", &view, &parts, &distinct)) {
        return NULL;
    }
    walker walk = walker_of(parts, !distinct);
    if (walk == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const int want_key = parts & 1, want_value = parts & 2;
    table key_table, value_table;
    table_init(&key_table);
    table_init(&value_table);
    PyObject *key_list = NULL, *value_list = NULL, *result = NULL;
    PyObject *keys = NULL, *values = NULL;
    if (!distinct) {
        if ((want_key && (key_list = PyList_New(0)) == NULL) ||
            (want_value && (value_list = PyList_New(0)) == NULL)) {
            goto done;
        }
    }
    Py_ssize_t count = 0;
    const char *why = NULL;
    if (walk((const unsigned char *)view.buf, view.len, &key_table, &value_table, key_list,
             value_list, &count, &why) < 0) {
        goto done;
    }
    if (distinct) {
        if ((want_key && (keys = table_set(&key_table)) == NULL) ||
            (want_value && (values = table_set(&value_table)) == NULL)) {
            goto done;
        }
    }
    else {
        keys = key_list;
        values = value_list;
        key_list = value_list = NULL;
    }
    result = Py_BuildValue("(OOns)", keys ? keys : Py_None, values ? values : Py_None, count,
                           why);
done:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(key_list);
    Py_XDECREF(value_list);
    table_free(&key_table);
    table_free(&value_table);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
walk_request(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer view;
    int parts;
    if (!PyArg_ParseTuple(args, "y*i:request", &view, &parts)) {
        return NULL;
    }
    walker walk = walker_of(parts, 0);
    if (walk == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)view.buf;
    const Py_ssize_t total = view.len;
    table key_table, value_table;
    table_init(&key_table);
    table_init(&value_table);
    PyObject *compressed = NULL, *keys = NULL, *values = NULL, *result = NULL;
    int readable = 1;
    Py_ssize_t pos = 0;
    while (total - pos >= LOG_OVERHEAD) {
        if (total - pos < RECORDS_OFFSET) { /* a truncated header */
            readable = 0;
            break;
        }
        const unsigned char *h = d + pos;
        const int32_t batch_length =
            (int32_t)((uint32_t)h[LENGTH_OFFSET] << 24 | (uint32_t)h[LENGTH_OFFSET + 1] << 16 |
                      (uint32_t)h[LENGTH_OFFSET + 2] << 8 | (uint32_t)h[LENGTH_OFFSET + 3]);
        const int64_t size = (int64_t)batch_length + LOG_OVERHEAD;
        if (size < RECORDS_OFFSET) { /* shorter than its header: the next would not follow */
            readable = 0;
            break;
        }
        const int attributes = h[ATTRIBUTES_OFFSET + 1]; /* the flags are in the low byte */
        if (!(attributes & CONTROL_FLAG)) {
            const Py_ssize_t start = pos + RECORDS_OFFSET;
            const Py_ssize_t end = size > total - pos ? total : pos + (Py_ssize_t)size;
            const int codec = attributes & CODEC_MASK;
            if (codec == 0) {
                Py_ssize_t count = 0;
                const char *why = NULL;
                int ok = walk(d + start, end - start, &key_table, &value_table, NULL, NULL,
                              &count, &why);
                if (ok < 0) {
                    goto done;
                }
                if (!ok) {
                    readable = 0;
                    break;
                }
            }
            else {
                if (compressed == NULL && (compressed = PyList_New(0)) == NULL) {
                    goto done;
                }
                PyObject *area = Py_BuildValue("(inn)", codec, start, end);
                if (area == NULL || PyList_Append(compressed, area) < 0) {
                    Py_XDECREF(area);
                    goto done;
                }
                Py_DECREF(area);
            }
        }
        if (size > total - pos) {
            break;
        }
        pos += (Py_ssize_t)size;
    }
    if (!readable) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (((parts & 1) && (keys = table_set(&key_table)) == NULL) ||
        ((parts & 2) && (values = table_set(&value_table)) == NULL)) {
        goto done;
    }
    result = Py_BuildValue("(OOO)", keys ? keys : Py_None, values ? values : Py_None,
                           compressed ? compressed : Py_None);
done:
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(compressed);
    table_free(&key_table);
    table_free(&value_table);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef walk_methods[] = {
    {"prefixes", walk_prefixes, METH_VARARGS,
     "prefixes(data, parts, distinct) -> (keys, values, count, reason)\n\n"
     "The key (parts 1), value (2) or both (3) prefixes of the records in one decompressed\n"
     "records area, read as validation.record_prefixes reads them: sets of the distinct ones\n"
     "(distinct) or one list entry per record; count records read; reason None, or why\n"
     "record `count` could not be read."},
    {"request", walk_request, METH_VARARGS,
     "request(data, parts) -> (keys, values, compressed) or None\n\n"
     "The distinct key (parts 1), value (2) or both (3) prefixes of the records of the\n"
     "uncompressed non-control batches in one partition's produce data, the batches read as\n"
     "validation._records_areas reads them; compressed: None or the (codec, start, end) of\n"
     "each compressed batch's records area, for the caller to decompress. None when a batch\n"
     "header or a record cannot be read."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot walk_slots[] = {
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef walk_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkalite.schema_registry._walk",
    .m_doc = "The produce validator's record walk in C (see validation.record_prefixes).",
    .m_size = 0,
    .m_methods = walk_methods,
    .m_slots = walk_slots,
};

PyMODINIT_FUNC
PyInit__walk(void)
{
    return PyModuleDef_Init(&walk_module);
}
