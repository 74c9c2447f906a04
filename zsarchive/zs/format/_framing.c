/* Record framing of ZS data payloads at C speed: the per-record loops of dump and validate.
 *
 * A data payload is a sequence of records, each a uleb128 length then that many bytes. These
 * functions only handle well-formed payloads: on anything else (a length running past the end,
 * a length field that is not in shortest form, an empty payload) they return None and the
 * pure-Python code in zsarchive.zs.format, which does the same work, names the problem.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The length field at *pos: on success stores the length and moves *pos past the field.
 * Returns -1 for a truncated, over-long (> 2**56) or non-shortest field. */
static int
read_length(const unsigned char *buf, Py_ssize_t n, Py_ssize_t *pos, Py_ssize_t *length)
{
    Py_ssize_t p = *pos;
    unsigned long long value = 0;
    int shift = 0;
    for (;;) {
        if (p >= n || shift > 56)
            return -1;
        unsigned char byte = buf[p++];
        value |= (unsigned long long)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            if (byte == 0 && shift > 0)
                return -1; /* a trailing zero group: not the shortest form */
            break;
        }
        shift += 7;
    }
    if (value > (unsigned long long)PY_SSIZE_T_MAX)
        return -1;
    *pos = p;
    *length = (Py_ssize_t)value;
    return 0;
}

/* Walk the payload once: count records and bytes of record data. -1 if it is not well formed. */
static int
scan(const unsigned char *buf, Py_ssize_t n, Py_ssize_t *count, Py_ssize_t *data)
{
    Py_ssize_t pos = 0, records = 0, bytes = 0, length;
    while (pos < n) {
        if (buf[pos] < 0x80) {
            length = buf[pos++];
        }
        else if (read_length(buf, n, &pos, &length) < 0) {
            return -1;
        }
        if (length > n - pos)
            return -1;
        pos += length;
        bytes += length;
        records++;
    }
    if (records == 0)
        return -1;
    *count = records;
    *data = bytes;
    return 0;
}

/* The length of the record whose length field is at *pos, moving *pos past the field: only for a
 * payload scan() accepted. */
static inline Py_ssize_t
next_length(const unsigned char *buf, Py_ssize_t n, Py_ssize_t *pos)
{
    Py_ssize_t length = 0;
    if (buf[*pos] < 0x80)
        return buf[(*pos)++];
    read_length(buf, n, pos, &length); /* cannot fail: scan() accepted the payload */
    return length;
}

/* The payload's buffer, its record count and its bytes of record data (scanned without the GIL):
 * 1 if it is well formed, 0 if not (the buffer released), -1 on an error set. */
static int
scanned(PyObject *arg, Py_buffer *view, Py_ssize_t *count, Py_ssize_t *data)
{
    if (PyObject_GetBuffer(arg, view, PyBUF_SIMPLE) < 0)
        return -1;
    int bad;
    Py_BEGIN_ALLOW_THREADS
    bad = scan(view->buf, view->len, count, data);
    Py_END_ALLOW_THREADS
    if (bad < 0) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

PyDoc_STRVAR(split_doc,
"split(payload) -> list of bytes, or None\n\n"
"The records of a well-formed data payload; None if it is not well formed.");

static PyObject *
split(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    Py_ssize_t count, data;
    int ok = scanned(arg, &view, &count, &data);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    const unsigned char *buf = view.buf;
    Py_ssize_t n = view.len;
    PyObject *records = PyList_New(count);
    if (records == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t pos = 0, length;
    for (Py_ssize_t i = 0; i < count; i++) {
        length = next_length(buf, n, &pos);
        PyObject *record = PyBytes_FromStringAndSize((const char *)buf + pos, length);
        if (record == NULL) {
            Py_DECREF(records);
            PyBuffer_Release(&view);
            return NULL;
        }
        PyList_SET_ITEM(records, i, record);
        pos += length;
    }
    PyBuffer_Release(&view);
    return records;
}

PyDoc_STRVAR(terminate_doc,
"terminate(payload, terminator) -> bytes, or None\n\n"
"The records of a well-formed data payload, each followed by terminator; None if the payload\n"
"is not well formed. Runs without the GIL, so several threads can re-frame blocks at once.");

static PyObject *
terminate(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "terminate() takes a payload and a terminator");
        return NULL;
    }
    Py_buffer view, term;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &term, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *buf = view.buf, *tbuf = term.buf;
    Py_ssize_t n = view.len, tlen = term.len, count = 0, data = 0;
    int bad;
    Py_BEGIN_ALLOW_THREADS
    bad = scan(buf, n, &count, &data);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (bad < 0 || (tlen > 0 && count > (PY_SSIZE_T_MAX - data) / tlen)) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, data + count * tlen);
    if (out == NULL)
        goto done;
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t pos = 0, length;
    while (pos < n) {
        length = next_length(buf, n, &pos);
        memcpy(dst, buf + pos, length);
        dst += length;
        pos += length;
        if (tlen == 1)
            *dst++ = tbuf[0];
        else {
            memcpy(dst, tbuf, tlen);
            dst += tlen;
        }
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&term);
    PyBuffer_Release(&view);
    return out;
}

PyDoc_STRVAR(spans_doc,
"spans(payload) -> (starts, ends) as bytes of native int64, or None\n\n"
"Where each record of a well-formed data payload starts and ends (record i is\n"
"payload[starts[i]:ends[i]]), without an object per record; None if it is not well formed.\n"
"Runs without the GIL.");

static PyObject *
spans(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    Py_ssize_t count, data;
    int ok = scanned(arg, &view, &count, &data);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    const unsigned char *buf = view.buf;
    Py_ssize_t n = view.len;
    PyObject *out = NULL, *starts = NULL, *ends = NULL;
    starts = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    ends = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (starts == NULL || ends == NULL)
        goto done;
    int64_t *first = (int64_t *)PyBytes_AS_STRING(starts), *last = (int64_t *)PyBytes_AS_STRING(ends);
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t pos = 0, length;
    for (Py_ssize_t i = 0; i < count; i++) {
        length = next_length(buf, n, &pos);
        first[i] = pos;
        pos += length;
        last[i] = pos;
    }
    Py_END_ALLOW_THREADS
    out = PyTuple_Pack(2, starts, ends);
done:
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"split", split, METH_O, split_doc},
    {"terminate", (PyCFunction)(void (*)(void))terminate, METH_FASTCALL, terminate_doc},
    {"spans", spans, METH_O, spans_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "zsarchive.zs.format._framing",
    "ZS data payload framing at C speed (optional; zsarchive.zs.format has the same in Python).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__framing(void)
{
    return PyModule_Create(&module);
}
