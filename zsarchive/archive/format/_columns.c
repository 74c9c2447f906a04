/* Tuple-encoded records decoded a column at a time at C speed: the batch decoding of
 * zsarchive.archive.format.tuples (Columns) for the millions of chunk ref records a restore reads.
 *
 * decode() walks every record once and fills caller-made arrays; it answers False as soon as one
 * record is not in the layout asked for (the caller then decodes record by record and names the
 * problem). intern() gives equal byte spans one code. Neither trusts its input: every position is
 * checked against the record's own end and the buffer's length.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define END 0x00
#define STRING 0x02
#define NONE 0x03
#define TUPLE 0x05
#define INT_ZERO 0x14
#define ESCAPE 0xFF

#define MAX_OUTPUTS 256

/* How many output arrays a layout letter fills, and the width of each element. */
static int
letter_outputs(char letter, int *count, Py_ssize_t widths[3])
{
    switch (letter) {
    case '(': case ')': *count = 0; return 0;
    case 'i': *count = 1; widths[0] = 8; return 0;
    case 'I': *count = 2; widths[0] = 8; widths[1] = 1; return 0;
    case 's': *count = 2; widths[0] = 8; widths[1] = 8; return 0;
    case 'S': *count = 3; widths[0] = 8; widths[1] = 8; widths[2] = 1; return 0;
    default: return -1;
    }
}

static void
release_all(Py_buffer *views, int n)
{
    for (int i = 0; i < n; i++)
        PyBuffer_Release(&views[i]);
}

/* Decode one record's run; 0 on success, -1 if it is not in the layout. */
static int
decode_row(const unsigned char *data, Py_ssize_t size, Py_ssize_t pos, Py_ssize_t end, const char *layout,
           char **out, Py_ssize_t row, Py_ssize_t *after)
{
    int o = 0;
    if (pos < 0 || end > size || pos > end)
        return -1;
    for (const char *l = layout; *l; l++) {
        if (pos >= end)
            return -1;
        unsigned char code = data[pos];
        int optional = (*l == 'I' || *l == 'S');
        switch (*l) {
        case '(':
        case ')':
            if (code != (*l == '(' ? TUPLE : END))
                return -1;
            pos++;
            break;
        case 'i':
        case 'I': {
            uint64_t value = 0;
            unsigned char present = 1;
            if (optional && code == NONE) {
                present = 0;
                pos++;
            }
            else {
                if (code < INT_ZERO || code > INT_ZERO + 8)
                    return -1;
                Py_ssize_t width = code - INT_ZERO;
                if (pos + 1 + width > end || (width && data[pos + 1] == 0))
                    return -1; /* past its encoding, or not the shortest encoding: the record-by-record
                                  decoder names it */
                for (Py_ssize_t k = 0; k < width; k++)
                    value = (value << 8) | data[pos + 1 + k];
                pos += 1 + width;
            }
            ((uint64_t *)out[o++])[row] = value;
            if (optional)
                ((unsigned char *)out[o++])[row] = present;
            break;
        }
        case 's':
        case 'S': {
            int64_t begin = pos + 1, stop = pos + 1; /* None spans no bytes */
            unsigned char present = 1;
            if (optional && code == NONE) {
                present = 0;
                pos++;
            }
            else {
                if (code != STRING)
                    return -1;
                const unsigned char *zero = memchr(data + pos + 1, END, (size_t)(end - pos - 1));
                if (zero == NULL)
                    return -1;
                stop = zero - data;
                if (stop + 1 < size && data[stop + 1] == ESCAPE)
                    return -1; /* an escaped NUL: decoded record by record */
                pos = stop + 1;
            }
            ((int64_t *)out[o++])[row] = begin;
            ((int64_t *)out[o++])[row] = stop;
            if (optional)
                ((unsigned char *)out[o++])[row] = present;
            break;
        }
        }
    }
    *after = pos;
    return 0;
}

PyDoc_STRVAR(decode_doc,
"decode(buf, starts, ends, layout, outputs) -> bool\n\n"
"Decode the run of elements ``layout`` names from each encoding buf[starts[i]:ends[i]] (int64\n"
"arrays) into the writable arrays ``outputs``: per letter, i: uint64 values; I: values and a\n"
"uint8 mask of those present; s: int64 begin and end of the text's bytes; S: the same and a mask\n"
"(a None text spans no bytes);\n"
"then one int64 array of the positions after the run. False when some encoding differs.");

static PyObject *
decode(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer buf, starts, ends;
    const char *layout;
    PyObject *outputs;
    if (!PyArg_ParseTuple(args, "y*y*y*sO!", &buf, &starts, &ends, &layout, &PyList_Type, &outputs))
        return NULL;
    Py_buffer views[MAX_OUTPUTS];
    char *out[MAX_OUTPUTS];
    int held = 0, wanted = 0, ok = 0;
    PyObject *result = NULL;
    Py_ssize_t rows = starts.len / 8;
    if (starts.len % 8 || ends.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "starts and ends must be int64 arrays of one length");
        goto done;
    }
    Py_ssize_t widths[MAX_OUTPUTS];
    for (const char *l = layout; *l; l++) {
        int count;
        Py_ssize_t w[3];
        if (letter_outputs(*l, &count, w) < 0) {
            PyErr_Format(PyExc_ValueError, "unknown layout letter %c", *l);
            goto done;
        }
        if (wanted + count + 1 > MAX_OUTPUTS) {
            PyErr_SetString(PyExc_ValueError, "layout too long");
            goto done;
        }
        for (int k = 0; k < count; k++)
            widths[wanted++] = w[k];
    }
    widths[wanted++] = 8; /* the positions after the run */
    if (PyList_GET_SIZE(outputs) != wanted) {
        PyErr_Format(PyExc_ValueError, "layout %s fills %d arrays, not %zd", layout, wanted,
                     PyList_GET_SIZE(outputs));
        goto done;
    }
    for (; held < wanted; held++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(outputs, held), &views[held], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        if (views[held].len != rows * widths[held]) {
            held++;
            PyErr_SetString(PyExc_ValueError, "an output array has the wrong size");
            goto done;
        }
        out[held] = views[held].buf;
    }
    const int64_t *first = starts.buf, *last = ends.buf;
    const unsigned char *data = buf.buf;
    Py_ssize_t size = buf.len;
    int64_t *after = (int64_t *)out[wanted - 1];
    ok = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        Py_ssize_t pos;
        if (decode_row(data, size, first[r], last[r], layout, out, r, &pos) < 0) {
            ok = 0;
            break;
        }
        after[r] = pos;
    }
    Py_END_ALLOW_THREADS
    result = PyBool_FromLong(ok);
done:
    release_all(views, held);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

static uint64_t
span_hash(const unsigned char *p, Py_ssize_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0x100000001B3ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, (size_t)n);
    h = (h ^ w) * 0x100000001B3ULL;
    h ^= h >> 32;
    return h;
}

PyDoc_STRVAR(intern_doc,
"intern(buf, begins, ends, codes) -> list of str\n\n"
"The distinct UTF-8 texts buf[begins[i]:ends[i]] (int64 arrays) in order of first appearance;\n"
"fills the writable int64 array ``codes`` with each span's index in that list. Raises\n"
"UnicodeDecodeError for a text that is not UTF-8.");

static PyObject *
intern_spans(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer buf, begins, ends, codes;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &buf, &begins, &ends, &codes))
        return NULL;
    PyObject *result = NULL;
    int64_t *slots = NULL, *firsts = NULL;
    uint64_t *hashes = NULL;
    Py_ssize_t rows = begins.len / 8;
    if (begins.len % 8 || ends.len != begins.len || codes.len != begins.len) {
        PyErr_SetString(PyExc_ValueError, "begins, ends and codes must be int64 arrays of one length");
        goto done;
    }
    const int64_t *b = begins.buf, *e = ends.buf;
    const unsigned char *data = buf.buf;
    for (Py_ssize_t r = 0; r < rows; r++) {
        if (b[r] < 0 || b[r] > e[r] || e[r] > buf.len) {
            PyErr_Format(PyExc_ValueError, "span %zd (%lld, %lld) is outside the buffer", r, (long long)b[r],
                         (long long)e[r]);
            goto done;
        }
    }
    Py_ssize_t capacity = 16;
    while (capacity < 2 * rows)
        capacity <<= 1;
    slots = PyMem_Calloc((size_t)capacity, sizeof(int64_t)); /* 0: empty, else distinct index + 1 */
    hashes = PyMem_Malloc((size_t)(rows ? rows : 1) * sizeof(uint64_t));
    firsts = PyMem_Malloc((size_t)(rows ? rows : 1) * sizeof(int64_t));
    if (slots == NULL || hashes == NULL || firsts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *code = codes.buf;
    Py_ssize_t distinct = 0, mask = capacity - 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        Py_ssize_t n = e[r] - b[r];
        uint64_t h = span_hash(data + b[r], n);
        Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)mask);
        for (;;) {
            int64_t held = slots[slot];
            if (held == 0) {
                slots[slot] = distinct + 1;
                hashes[distinct] = h;
                firsts[distinct] = r;
                code[r] = distinct++;
                break;
            }
            int64_t f = firsts[held - 1];
            if (hashes[held - 1] == h && e[f] - b[f] == n && memcmp(data + b[f], data + b[r], (size_t)n) == 0) {
                code[r] = held - 1;
                break;
            }
            slot = (slot + 1) & mask;
        }
    }
    Py_END_ALLOW_THREADS
    result = PyList_New(distinct);
    if (result == NULL)
        goto done;
    for (Py_ssize_t d = 0; d < distinct; d++) {
        int64_t f = firsts[d];
        PyObject *text = PyUnicode_DecodeUTF8((const char *)data + b[f], (Py_ssize_t)(e[f] - b[f]), "strict");
        if (text == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, d, text);
    }
done:
    PyMem_Free(slots);
    PyMem_Free(hashes);
    PyMem_Free(firsts);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&begins);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&codes);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {"intern", intern_spans, METH_VARARGS, intern_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "zsarchive.archive.format._columns",
    "Batch decoding of tuple-encoded records at C speed (optional; zsarchive.archive.format.tuples "
    "has the same with numpy).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__columns(void)
{
    return PyModule_Create(&module);
}
