/* A batch of manifest chunk refs read in one pass at C speed: what an incremental export compares.
 *
 * zsarchive.icechunk.manifest reads refs with numpy, a field of every ref per step; this reads
 * each ref once, with the same checks. It only handles well-formed batches of native and virtual
 * refs whose ChunkRef layouts the caller has validated already: on anything else (an unknown
 * layout, an inline ref or an etag, an offset outside the buffer, refs out of order, a location
 * longer than 248 bytes, more location bytes than the buffer holds, a run of hash collisions) it
 * returns None, and the numpy code, which reads the same batch, names the problem or handles it.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Columns of a layout row (zsarchive.icechunk.manifest._Layout.row). */
enum { SIZE, INDEX, OFFSET, LENGTH, PAYLOAD, ETAG, MODIFIED, CODE, COMPRESSED, NFIELDS };
enum { CODE_INLINE, CODE_NATIVE, CODE_VIRTUAL };

#define MAX_LOCATION 248 /* longer locations: the numpy code decides how to read them */
#define MAX_PROBES 64    /* a longer chain of colliding hashes: the numpy code dedupes instead */

static inline uint32_t
le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t
le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static inline uint64_t
hash_bytes(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        h = (h ^ le64(p)) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        tail |= (uint64_t)p[i] << (8 * i);
    h = (h ^ tail) * 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 32);
}

/* The vector that the uoffset at slot points to: its first element's position and its length, or -1
 * when its length field lies outside the buffer. The elements are the caller's to check. */
static inline int
vector_at(const unsigned char *buf, Py_ssize_t size, Py_ssize_t slot, Py_ssize_t *start, Py_ssize_t *count)
{
    Py_ssize_t vec = slot + (Py_ssize_t)le32(buf + slot);
    if (vec + 4 > size)
        return -1;
    *count = le32(buf + vec);
    *start = vec + 4;
    return 0;
}

typedef struct {
    /* inputs */
    const unsigned char *buf;
    Py_ssize_t size, start, lo, n, ndim, nlayouts;
    const int64_t *vtables, *rows;
    const uint32_t *previous; /* the coordinates of the ref before the batch, or NULL */
    /* outputs, n entries each (coords: n * ndim, ids: 2 * n) */
    uint32_t *coords;
    int64_t *pos;
    uint8_t *layout;
    uint64_t *offset, *length, *ids;
    uint32_t *modified;
    Py_ssize_t *location; /* 1 + the index of the ref's location among the distinct ones, 0 for none */
    Py_ssize_t *firsts;   /* the first ref of each distinct location */
    /* scratch: a hash table of cap slots (index into the distinct locations, hash), their spans */
    Py_ssize_t cap, *slots, *starts, *lengths;
    uint64_t *hashes;
    Py_ssize_t distinct, natives, stamped;
} Batch;

/* Read every ref of the batch; 0 when done, -1 when the numpy code must read it. No Python calls.
 * ids and modified are written from the first ref that has one on (the earlier ones zeroed then):
 * a batch of virtual refs without last-modified times leaves them untouched. */
static int
read_batch(Batch *b)
{
    const unsigned char *buf = b->buf;
    const Py_ssize_t size = b->size, n = b->n, ndim = b->ndim, cap = b->cap;
    Py_ssize_t location_bytes = 0;
    if (n * 4 * (ndim + 1) > size)
        return -1;
    memset(b->slots, 0xff, cap * sizeof(Py_ssize_t)); /* -1: empty */
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t entry = b->start + 4 * (b->lo + j); /* the refs vector is known to fit the buffer */
        Py_ssize_t p = entry + (Py_ssize_t)le32(buf + entry);
        if (p + 4 > size)
            return -1;
        int64_t vtable = (int64_t)p - (int32_t)le32(buf + p);
        Py_ssize_t k = 0;
        while (k < b->nlayouts && b->vtables[k] != vtable)
            k++;
        if (k == b->nlayouts)
            return -1;
        const int64_t *row = b->rows + NFIELDS * k;
        if (p + row[SIZE] > size || row[CODE] == CODE_INLINE || row[ETAG])
            return -1;
        /* the fields lie inside the table (the layout is validated): only what they point to is checked */
        Py_ssize_t index, count;
        if (vector_at(buf, size, p + row[INDEX], &index, &count) < 0 || count != ndim || index + 4 * count > size)
            return -1;
        uint32_t *here = b->coords + j * ndim;
        for (Py_ssize_t d = 0; d < ndim; d++)
            here[d] = le32(buf + index + 4 * d);
        const uint32_t *before = j ? here - ndim : b->previous;
        if (before != NULL) { /* strictly after the ref before it */
            Py_ssize_t d = 0;
            while (d < ndim && before[d] == here[d])
                d++;
            if (d == ndim || before[d] > here[d])
                return -1;
        }
        b->pos[j] = p;
        b->layout[j] = (uint8_t)k;
        b->offset[j] = row[OFFSET] ? le64(buf + p + row[OFFSET]) : 0;
        b->length[j] = row[LENGTH] ? le64(buf + p + row[LENGTH]) : 0;
        uint32_t stamp = row[MODIFIED] ? le32(buf + p + row[MODIFIED]) : 0;
        if (stamp && !b->stamped++)
            memset(b->modified, 0, j * sizeof(uint32_t));
        if (b->stamped)
            b->modified[j] = stamp;
        if (row[CODE] == CODE_NATIVE) {
            if (!b->natives++) {
                memset(b->ids, 0, j * sizeof(uint64_t));
                memset(b->ids + n, 0, j * sizeof(uint64_t));
            }
            const unsigned char *id = buf + p + row[PAYLOAD];
            b->ids[j] = le64(id);
            b->ids[n + j] = le32(id + 8);
            b->location[j] = 0;
            continue;
        }
        if (b->natives)
            b->ids[j] = b->ids[n + j] = 0;
        Py_ssize_t text, len;
        if (vector_at(buf, size, p + row[PAYLOAD], &text, &len) < 0 || len > MAX_LOCATION || text + len > size)
            return -1;
        location_bytes += len;
        if (location_bytes > size) /* the numpy code judges vectors that overlap */
            return -1;
        uint64_t h = hash_bytes(buf + text, len);
        Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(cap - 1)), probes = 0;
        for (;;) {
            Py_ssize_t d = b->slots[s];
            if (d < 0) {
                b->slots[s] = b->distinct;
                b->hashes[s] = h;
                b->starts[b->distinct] = text;
                b->lengths[b->distinct] = len;
                b->firsts[b->distinct] = j;
                b->location[j] = 1 + b->distinct++;
                break;
            }
            if (b->hashes[s] == h && b->lengths[d] == len && memcmp(buf + b->starts[d], buf + text, len) == 0) {
                b->location[j] = 1 + d;
                break;
            }
            if (++probes > MAX_PROBES)
                return -1;
            s = (s + 1) & (cap - 1);
        }
    }
    return 0;
}

/* The buffer of args[i] (writable when asked), which must hold exactly ``size`` bytes. */
static int
get_buffer(PyObject *arg, Py_buffer *view, int writable, Py_ssize_t size, int *held)
{
    if (PyObject_GetBuffer(arg, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    (*held)++;
    if (size >= 0 && view->len != size) {
        PyErr_SetString(PyExc_ValueError, "read_refs(): a buffer of the wrong size");
        return -1;
    }
    return 0;
}

static int
get_int(PyObject *arg, Py_ssize_t *out)
{
    *out = PyLong_AsSsize_t(arg);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

PyDoc_STRVAR(read_refs_doc,
"read_refs(payload, start, lo, n, ndim, vtables, rows, previous, coords, pos, layout, offset, length, ids,\n"
"          modified, location, firsts, scratch) -> (distinct, natives, stamped), or None\n\n"
"Refs lo to lo + n of the refs vector whose first entry is at start, each with ndim coordinates, into\n"
"the writable buffers: coords (uint32, n * ndim), pos (int64), layout (uint8: index into vtables),\n"
"offset and length (uint64), ids (uint64, 2 * n: a chunk id's bytes as two words, written when some ref\n"
"is native), modified (uint32, written when some ref has a last-modified time), location (ssize_t:\n"
"1 + the index of the ref's location among the distinct ones, 0 for a native ref), firsts (ssize_t:\n"
"the first ref of each distinct location); scratch: 80 * n bytes (16 per slot of a hash table of the\n"
"least power of two >= 2 * n slots, and 16 per ref) will do. vtables: int64 positions\n"
"of validated ChunkRef vtables; rows: their layout rows (9 int64 each); previous: the uint32\n"
"coordinates of the ref before, or None. Returns the number of distinct locations, of native refs and\n"
"of refs with a last-modified time; None when the numpy code must read the batch.");

static PyObject *
read_refs(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 18) {
        PyErr_SetString(PyExc_TypeError, "read_refs() takes 18 arguments");
        return NULL;
    }
    Batch b;
    memset(&b, 0, sizeof b);
    if (get_int(args[1], &b.start) || get_int(args[2], &b.lo) || get_int(args[3], &b.n) ||
        get_int(args[4], &b.ndim))
        return NULL;
    if (b.n <= 0 || b.start < 0 || b.lo < 0 || b.ndim < 0) {
        PyErr_SetString(PyExc_ValueError, "read_refs(): a batch of at least one ref");
        return NULL;
    }
    const Py_ssize_t n = b.n;
    b.cap = 1;
    while (b.cap < 2 * n)
        b.cap <<= 1;
    Py_buffer views[16];
    int held = 0, have_previous = args[7] != Py_None;
    PyObject *out = NULL;
    /* payload, vtables, rows, previous?, then the outputs and the scratch */
    if (get_buffer(args[0], &views[held], 0, -1, &held) < 0 || get_buffer(args[5], &views[held], 0, -1, &held) < 0)
        goto release;
    b.nlayouts = views[1].len / (Py_ssize_t)sizeof(int64_t);
    if (get_buffer(args[6], &views[held], 0, b.nlayouts * NFIELDS * (Py_ssize_t)sizeof(int64_t), &held) < 0)
        goto release;
    if (have_previous &&
        get_buffer(args[7], &views[held], 0, b.ndim * (Py_ssize_t)sizeof(uint32_t), &held) < 0)
        goto release;
    const Py_ssize_t sizes[9] = {
        n * b.ndim * (Py_ssize_t)sizeof(uint32_t), n * (Py_ssize_t)sizeof(int64_t), n,
        n * (Py_ssize_t)sizeof(uint64_t), n * (Py_ssize_t)sizeof(uint64_t), 2 * n * (Py_ssize_t)sizeof(uint64_t),
        n * (Py_ssize_t)sizeof(uint32_t), n * (Py_ssize_t)sizeof(Py_ssize_t), n * (Py_ssize_t)sizeof(Py_ssize_t)};
    int first_output = held;
    for (int i = 0; i < 9; i++)
        if (get_buffer(args[8 + i], &views[held], 1, sizes[i], &held) < 0)
            goto release;
    if (get_buffer(args[17], &views[held], 1, -1, &held) < 0)
        goto release;
    Py_ssize_t scratch = b.cap * (Py_ssize_t)(sizeof(Py_ssize_t) + sizeof(uint64_t)) +
                         2 * n * (Py_ssize_t)sizeof(Py_ssize_t);
    if (b.nlayouts > 255 || views[held - 1].len < scratch || b.start + 4 * (b.lo + n) > views[0].len) {
        PyErr_SetString(PyExc_ValueError, "read_refs(): inconsistent arguments");
        goto release;
    }
    b.buf = views[0].buf;
    b.size = views[0].len;
    b.vtables = views[1].buf;
    b.rows = views[2].buf;
    b.previous = have_previous ? views[3].buf : NULL;
    b.coords = views[first_output].buf;
    b.pos = views[first_output + 1].buf;
    b.layout = views[first_output + 2].buf;
    b.offset = views[first_output + 3].buf;
    b.length = views[first_output + 4].buf;
    b.ids = views[first_output + 5].buf;
    b.modified = views[first_output + 6].buf;
    b.location = views[first_output + 7].buf;
    b.firsts = views[first_output + 8].buf;
    char *space = views[held - 1].buf;
    b.slots = (Py_ssize_t *)space;
    b.hashes = (uint64_t *)(space + b.cap * sizeof(Py_ssize_t));
    b.starts = (Py_ssize_t *)(space + b.cap * (sizeof(Py_ssize_t) + sizeof(uint64_t)));
    b.lengths = b.starts + n;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = read_batch(&b);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        out = Py_None;
        Py_INCREF(out);
    }
    else
        out = Py_BuildValue("nnn", b.distinct, b.natives, b.stamped);
release:
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    return out;
}

static PyMethodDef methods[] = {
    {"read_refs", (PyCFunction)(void (*)(void))read_refs, METH_FASTCALL, read_refs_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "zsarchive.icechunk.manifest._refscan",
    "Manifest chunk refs read at C speed (optional; zsarchive.icechunk.manifest has the same in numpy).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__refscan(void)
{
    return PyModule_Create(&module);
}
