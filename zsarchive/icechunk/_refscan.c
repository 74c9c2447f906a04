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

typedef struct {
    /* inputs */
    const unsigned char *buf;
    Py_ssize_t size, start, lo, n, ndim, nlayouts;
    const int64_t *vtables, *rows;
    const uint32_t *previous; /* the coordinates of the ref before the batch, or NULL */
    /* outputs, n entries each (coords: n * ndim) */
    uint32_t *coords;
    int64_t *pos;
    uint8_t *layout;
    uint64_t *offset, *length, *id_low, *id_high;
    uint32_t *modified;
    Py_ssize_t *location; /* 1 + the index of the ref's location among the distinct ones */
    Py_ssize_t *firsts;   /* the first ref of each distinct location */
    Py_ssize_t distinct, natives, virtuals, stamped;
} Batch;

/* Read every ref of the batch; 0 when done, -1 when the numpy code must read it. No Python calls. */
static int
read_batch(Batch *b)
{
    const unsigned char *buf = b->buf;
    const Py_ssize_t size = b->size, n = b->n;
    Py_ssize_t ndim = b->ndim, location_bytes = 0;
    Py_ssize_t cap = 1;
    while (cap < 2 * n)
        cap <<= 1;
    Py_ssize_t *slots = PyMem_RawMalloc(cap * sizeof(Py_ssize_t));
    uint64_t *hashes = PyMem_RawMalloc(cap * sizeof(uint64_t));
    Py_ssize_t *starts = PyMem_RawMalloc(n * sizeof(Py_ssize_t)), *lengths = PyMem_RawMalloc(n * sizeof(Py_ssize_t));
    int status = -1;
    if (slots == NULL || hashes == NULL || starts == NULL || lengths == NULL)
        goto done;
    memset(slots, 0xff, cap * sizeof(Py_ssize_t)); /* -1: empty */
    if (ndim >= 0 && n * 4 * (ndim + 1) > size)
        goto done;
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_ssize_t entry = b->start + 4 * (b->lo + j); /* the refs vector is known to fit the buffer */
        Py_ssize_t p = entry + (Py_ssize_t)le32(buf + entry);
        if (p + 4 > size)
            goto done;
        int64_t vtable = (int64_t)p - (int32_t)le32(buf + p);
        Py_ssize_t k = 0;
        while (k < b->nlayouts && b->vtables[k] != vtable)
            k++;
        if (k == b->nlayouts)
            goto done;
        const int64_t *row = b->rows + NFIELDS * k;
        if (p + row[SIZE] > size || row[CODE] == CODE_INLINE || row[ETAG])
            goto done;
        /* the fields lie inside the table (the layout is validated): only what they point to is checked */
        Py_ssize_t at = p + row[INDEX];
        Py_ssize_t vec = at + (Py_ssize_t)le32(buf + at);
        if (vec + 4 > size)
            goto done;
        Py_ssize_t count = le32(buf + vec);
        if (vec + 4 + 4 * count > size)
            goto done;
        if (ndim < 0) {
            ndim = count;
            if (n * 4 * (ndim + 1) > size)
                goto done;
            b->ndim = ndim;
            b->coords = PyMem_RawMalloc((n * ndim + 1) * sizeof(uint32_t));
            if (b->coords == NULL)
                goto done;
        }
        if (count != ndim)
            goto done;
        uint32_t *here = b->coords + j * ndim;
        for (Py_ssize_t d = 0; d < ndim; d++)
            here[d] = le32(buf + vec + 4 + 4 * d);
        const uint32_t *before = j ? here - ndim : b->previous;
        if (before != NULL || j) { /* strictly after the ref before it */
            Py_ssize_t d = 0;
            while (d < ndim && before[d] == here[d])
                d++;
            if (d == ndim || before[d] > here[d])
                goto done;
        }
        b->pos[j] = p;
        b->layout[j] = (uint8_t)k;
        b->offset[j] = row[OFFSET] ? le64(buf + p + row[OFFSET]) : 0;
        b->length[j] = row[LENGTH] ? le64(buf + p + row[LENGTH]) : 0;
        b->modified[j] = row[MODIFIED] ? le32(buf + p + row[MODIFIED]) : 0;
        b->stamped += b->modified[j] != 0;
        if (row[CODE] == CODE_NATIVE) {
            const unsigned char *id = buf + p + row[PAYLOAD];
            b->id_low[j] = le64(id);
            b->id_high[j] = le32(id + 8);
            b->location[j] = 0;
            b->natives++;
            continue;
        }
        b->id_low[j] = b->id_high[j] = 0;
        b->virtuals++;
        Py_ssize_t slot = p + row[PAYLOAD];
        Py_ssize_t text = slot + (Py_ssize_t)le32(buf + slot);
        if (text + 4 > size)
            goto done;
        Py_ssize_t len = le32(buf + text);
        text += 4;
        if (len > MAX_LOCATION || text + len > size)
            goto done;
        location_bytes += len;
        if (location_bytes > size) /* the numpy code judges vectors that overlap */
            goto done;
        uint64_t h = hash_bytes(buf + text, len);
        Py_ssize_t s = (Py_ssize_t)(h & (uint64_t)(cap - 1)), probes = 0;
        for (;;) {
            Py_ssize_t d = slots[s];
            if (d < 0) {
                slots[s] = b->distinct;
                hashes[s] = h;
                starts[b->distinct] = text;
                lengths[b->distinct] = len;
                b->firsts[b->distinct] = j;
                b->location[j] = 1 + b->distinct++;
                break;
            }
            if (hashes[s] == h && lengths[d] == len && memcmp(buf + starts[d], buf + text, len) == 0) {
                b->location[j] = 1 + d;
                break;
            }
            if (++probes > MAX_PROBES)
                goto done;
            s = (s + 1) & (cap - 1);
        }
    }
    status = 0;
done:
    PyMem_RawFree(slots);
    PyMem_RawFree(hashes);
    PyMem_RawFree(starts);
    PyMem_RawFree(lengths);
    return status;
}

static int
get_int(PyObject *arg, Py_ssize_t *out)
{
    *out = PyLong_AsSsize_t(arg);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *
as_bytes(const void *data, Py_ssize_t size)
{
    return PyByteArray_FromStringAndSize((const char *)data, size);
}

PyDoc_STRVAR(read_refs_doc,
"read_refs(payload, start, lo, n, ndim, vtables, rows, previous) -> tuple, or None\n\n"
"Refs lo to lo + n of the refs vector whose first entry is at start: (ndim, coords, pos, layout,\n"
"offset, length, id_low, id_high, modified, location, firsts, natives, stamped) as bytearrays of\n"
"uint32 (n * ndim), int64, uint8 (index into vtables), uint64, uint64, uint64, uint64, uint32, ssize_t\n"
"(1 + index of the distinct location, 0 for a native ref), ssize_t (first ref of each distinct\n"
"location), and the counts of native refs and of refs with a last-modified time. vtables: int64\n"
"positions of validated ChunkRef vtables; rows: their layout rows (9 int64 each); ndim: -1 when not\n"
"known; previous: the uint32 coordinates of the ref before, or None. None when the numpy code\n"
"must read the batch.");

static PyObject *
read_refs(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "read_refs() takes 8 arguments");
        return NULL;
    }
    Batch b;
    memset(&b, 0, sizeof b);
    Py_buffer payload, vtables, rows, previous;
    int have_previous = args[7] != Py_None;
    if (get_int(args[1], &b.start) || get_int(args[2], &b.lo) || get_int(args[3], &b.n) ||
        get_int(args[4], &b.ndim))
        return NULL;
    if (b.n <= 0 || b.start < 0 || b.lo < 0) {
        PyErr_SetString(PyExc_ValueError, "read_refs(): a batch of at least one ref");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &payload, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[5], &vtables, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&payload);
        return NULL;
    }
    if (PyObject_GetBuffer(args[6], &rows, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&vtables);
        PyBuffer_Release(&payload);
        return NULL;
    }
    if (have_previous && PyObject_GetBuffer(args[7], &previous, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&rows);
        PyBuffer_Release(&vtables);
        PyBuffer_Release(&payload);
        return NULL;
    }
    PyObject *out = NULL;
    b.nlayouts = vtables.len / (Py_ssize_t)sizeof(int64_t);
    if (b.nlayouts > 255 || rows.len != b.nlayouts * NFIELDS * (Py_ssize_t)sizeof(int64_t) ||
        (have_previous && previous.len != b.ndim * (Py_ssize_t)sizeof(uint32_t)) ||
        b.start + 4 * (b.lo + b.n) > payload.len) {
        PyErr_SetString(PyExc_ValueError, "read_refs(): inconsistent arguments");
        goto release;
    }
    b.buf = payload.buf;
    b.size = payload.len;
    b.vtables = vtables.buf;
    b.rows = rows.buf;
    b.previous = have_previous ? previous.buf : NULL;
    if (b.ndim >= 0 && (b.coords = PyMem_RawMalloc((b.n * b.ndim + 1) * sizeof(uint32_t))) == NULL) {
        PyErr_NoMemory();
        goto release;
    }
    b.pos = PyMem_RawMalloc(b.n * sizeof(int64_t));
    b.layout = PyMem_RawMalloc(b.n);
    b.offset = PyMem_RawMalloc(b.n * sizeof(uint64_t));
    b.length = PyMem_RawMalloc(b.n * sizeof(uint64_t));
    b.id_low = PyMem_RawMalloc(b.n * sizeof(uint64_t));
    b.id_high = PyMem_RawMalloc(b.n * sizeof(uint64_t));
    b.modified = PyMem_RawMalloc(b.n * sizeof(uint32_t));
    b.location = PyMem_RawMalloc(b.n * sizeof(Py_ssize_t));
    b.firsts = PyMem_RawMalloc(b.n * sizeof(Py_ssize_t));
    if (!b.pos || !b.layout || !b.offset || !b.length || !b.id_low || !b.id_high || !b.modified || !b.location ||
        !b.firsts) {
        PyErr_NoMemory();
        goto out_free;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = read_batch(&b);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        out = Py_None;
        Py_INCREF(out);
        goto out_free;
    }
    out = Py_BuildValue("nNNNNNNNNNNnn", b.ndim, as_bytes(b.coords, b.n * b.ndim * sizeof(uint32_t)),
                        as_bytes(b.pos, b.n * sizeof(int64_t)), as_bytes(b.layout, b.n),
                        as_bytes(b.offset, b.n * sizeof(uint64_t)), as_bytes(b.length, b.n * sizeof(uint64_t)),
                        as_bytes(b.id_low, b.n * sizeof(uint64_t)), as_bytes(b.id_high, b.n * sizeof(uint64_t)),
                        as_bytes(b.modified, b.n * sizeof(uint32_t)),
                        as_bytes(b.location, b.n * sizeof(Py_ssize_t)),
                        as_bytes(b.firsts, b.distinct * sizeof(Py_ssize_t)), b.natives, b.stamped);
out_free:
    PyMem_RawFree(b.coords);
    PyMem_RawFree(b.pos);
    PyMem_RawFree(b.layout);
    PyMem_RawFree(b.offset);
    PyMem_RawFree(b.length);
    PyMem_RawFree(b.id_low);
    PyMem_RawFree(b.id_high);
    PyMem_RawFree(b.modified);
    PyMem_RawFree(b.location);
    PyMem_RawFree(b.firsts);
release:
    if (have_previous)
        PyBuffer_Release(&previous);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&vtables);
    PyBuffer_Release(&payload);
    return out;
}

static PyMethodDef methods[] = {
    {"read_refs", (PyCFunction)(void (*)(void))read_refs, METH_FASTCALL, read_refs_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "zsarchive.icechunk._refscan",
    "Manifest chunk refs read at C speed (optional; zsarchive.icechunk.manifest has the same in numpy).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__refscan(void)
{
    return PyModule_Create(&module);
}
