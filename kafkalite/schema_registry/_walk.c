/* kafkalite.schema_registry._walk: the produce validator's record walk in C.
 *
 * One function, prefixes(data, parts, distinct), over one batch's decompressed records area
 * (any contiguous buffer). It reads the records exactly as validation.record_prefixes does, a
 * lenient consumer's (librdkafka's) way:
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
 *
 * It returns (keys, values, count, reason): keys and values are None for a part not asked for
 * (parts: 1 key, 2 value, 3 both), else a set of the distinct prefixes (distinct true) or a
 * list with one entry per record read; count is the number of records read; reason is None
 * when the whole area was read, else why record `count` could not be.
 *
 * The common path builds no object per record: each distinct prefix becomes one bytes object
 * (kept in a small open-addressing table keyed by the prefix packed into an integer), and a
 * list holds references to those. Every read is bounds-checked against the buffer's length;
 * positions are kept as differences from the end so no sum can overflow.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define PREFIX 5
#define SMALL 16

/* The distinct prefixes of one part: packed key -> bytes object (a strong reference). A key is
 * (length + 1) << 40 | the bytes big-endian in the low 40 bits, so 0 marks an empty slot. */
typedef struct {
    uint64_t *keys;
    PyObject **objs;
    Py_ssize_t cap; /* a power of two */
    Py_ssize_t used;
    uint64_t last_key; /* the previous record's prefix: a batch mostly repeats one */
    PyObject *last_obj;
    unsigned char last_bytes[PREFIX]; /* last_key's bytes when they are PREFIX long */
    int last_full;
    int saw_null;
    uint64_t small_keys[SMALL];
    PyObject *small_objs[SMALL];
} table;

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
    t->last_full = 0;
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

/* The bytes object of the prefix p[0:n] (n <= PREFIX), made on its first sight; a borrowed
 * reference (the table owns it), NULL with an exception set when out of memory. */
static PyObject *
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
            t->last_key = key;
            t->last_obj = t->objs[i];
            t->last_full = n == PREFIX;
            if (n == PREFIX) {
                memcpy(t->last_bytes, p, PREFIX);
            }
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
    t->last_key = key;
    t->last_obj = obj;
    t->last_full = n == PREFIX;
    if (n == PREFIX) {
        memcpy(t->last_bytes, p, PREFIX);
    }
    return obj;
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

#if defined(__GNUC__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define NOINLINE __attribute__((noinline))
#else
#define LIKELY(x) (x)
#define NOINLINE
#endif

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
    if (LIKELY(n == PREFIX && t->last_full && memcmp(d + at, t->last_bytes, PREFIX) == 0)) {
        *obj = t->last_obj; /* the previous record's prefix again */
        return 1;
    }
    *obj = table_get(t, d + at, n);
    return *obj == NULL ? -1 : 1;
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
    if (parts < 1 || parts > 3) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "parts is 1 (key), 2 (value) or 3 (both)");
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)view.buf;
    const Py_ssize_t limit = view.len;
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
    Py_ssize_t at = 0, count = 0;
    const char *why = NULL;
    while (at < limit) {
        int64_t length, key_size, value_size;
        if (!read_varint(d, limit, &at, &length, &why)) {
            break;
        }
        if (length < 0 || length > limit - at) {
            why = "a record's length runs past the records";
            break;
        }
        const Py_ssize_t end = at + (Py_ssize_t)length;
        if (limit - at < 2) { /* the attributes byte, then at least the timestamp's */
            why = "a record's head runs past the records";
            break;
        }
        at += 1;
        if (!skip_varint(d, limit, &at) || !skip_varint(d, limit, &at)) {
            why = "a record's head runs past the records";
            break;
        }
        if (!read_varint(d, limit, &at, &key_size, &why)) {
            break;
        }
        PyObject *key = NULL, *value = NULL;
        int ok;
        if (want_key) {
            ok = prefix_of(&key_table, d, limit, at, key_size, &key, &why,
                           "a key runs past the records");
            if (ok < 0) {
                goto done;
            }
            if (!ok) {
                break;
            }
        }
        if (want_value) {
            Py_ssize_t v = at;
            if (key_size > 0) {
                if (key_size >= limit - v) {
                    why = "a key runs past the records";
                    break;
                }
                v += (Py_ssize_t)key_size;
            }
            if (!read_varint(d, limit, &v, &value_size, &why)) {
                break;
            }
            ok = prefix_of(&value_table, d, limit, v, value_size, &value, &why,
                           "a value runs past the records");
            if (ok < 0) {
                goto done;
            }
            if (!ok) {
                break;
            }
        }
        if (key_list != NULL && PyList_Append(key_list, key) < 0) {
            goto done;
        }
        if (value_list != NULL && PyList_Append(value_list, value) < 0) {
            goto done;
        }
        count++;
        at = end;
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

static PyMethodDef walk_methods[] = {
    {"prefixes", walk_prefixes, METH_VARARGS,
     "prefixes(data, parts, distinct) -> (keys, values, count, reason)\n\n"
     "The key (parts 1), value (2) or both (3) prefixes of the records in one decompressed\n"
     "records area, read as validation.record_prefixes reads them: sets of the distinct ones\n"
     "(distinct) or one list entry per record; count records read; reason None, or why\n"
     "record `count` could not be read."},
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
