/* tidelog.records._columnar: decode a (decompressed) magic v2 records section straight into
 * Arrow column buffers, with no Python object per record.
 *
 * The checks are those of tidelog.records.record._decode (see that module for the record
 * layout), plus the ones int64 columns need: a varint wider than 64 bits, an offset or a
 * timestamp in microseconds outside int64 is corrupt. Every length is checked against the
 * record's own end before any copy. The buffer layout is documented in columnar.py.
 *
 * Buffers are bytes objects grown geometrically and handed over at finish() after a shrink, so
 * finish() copies nothing. An append that fails restores every length and counter saved at its
 * start, so rows appended before it stay intact.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MIN_RECORD_SIZE 7
#define MAX_VARINT_BYTES 10
#define ARROW_MAX_OFFSET INT32_MAX
#define TIMESTAMP_MS_LIMIT (INT64_MAX / 1000)

static PyObject *corrupt_record_error; /* tidelog.errors.CorruptRecordError */

enum {
    OFFSETS, TIMESTAMPS, TIMESTAMP_TYPES,
    KEY_VALIDITY, KEY_OFFSETS, KEY_DATA,
    VALUE_VALIDITY, VALUE_OFFSETS, VALUE_DATA,
    LIST_VALIDITY, LIST_OFFSETS,
    HEADER_KEY_OFFSETS, HEADER_KEY_DATA,
    HEADER_VALUE_VALIDITY, HEADER_VALUE_OFFSETS, HEADER_VALUE_DATA,
    BUFFER_COUNT
};

typedef struct {
    PyObject *bytes; /* capacity = PyBytes_GET_SIZE(bytes) */
    Py_ssize_t len;
} Buffer;

typedef struct {
    Py_ssize_t lens[BUFFER_COUNT];
    int64_t rows, key_nulls, value_nulls, list_nulls, entries, header_value_nulls;
} State;

typedef struct {
    PyObject_HEAD
    int include_headers;
    Buffer buffers[BUFFER_COUNT];
    State state; /* counters; its lens are unused (the live lengths sit in buffers[]) */
} ColumnBuilder;

/* ---- buffers ------------------------------------------------------------------------------ */

static inline uint8_t *buffer_data(Buffer *buffer) {
    return (uint8_t *)PyBytes_AS_STRING(buffer->bytes);
}

/* Make room for `extra` more bytes. Grows by copying into a new bytes object, so a failed
 * growth (MemoryError) leaves the old contents intact. */
static int buffer_reserve(Buffer *buffer, Py_ssize_t extra) {
    Py_ssize_t capacity = PyBytes_GET_SIZE(buffer->bytes);
    if (extra <= capacity - buffer->len) {
        return 0;
    }
    if (extra > PY_SSIZE_T_MAX / 2 - buffer->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t needed = buffer->len + extra;
    Py_ssize_t new_capacity = capacity * 2;
    if (new_capacity < needed) {
        new_capacity = needed;
    }
    if (new_capacity < 256) {
        new_capacity = 256;
    }
    PyObject *grown = PyBytes_FromStringAndSize(NULL, new_capacity);
    if (grown == NULL) {
        return -1;
    }
    memcpy(PyBytes_AS_STRING(grown), PyBytes_AS_STRING(buffer->bytes), (size_t)buffer->len);
    Py_SETREF(buffer->bytes, grown);
    return 0;
}

static inline void store_le32(uint8_t *p, int32_t value) {
    uint32_t v = (uint32_t)value;
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static inline void store_le64(uint8_t *p, int64_t value) {
    uint64_t v = (uint64_t)value;
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* Callers reserve first. */
static inline void push_le32(Buffer *buffer, int32_t value) {
    store_le32(buffer_data(buffer) + buffer->len, value);
    buffer->len += 4;
}

static inline void push_le64(Buffer *buffer, int64_t value) {
    store_le64(buffer_data(buffer) + buffer->len, value);
    buffer->len += 8;
}

/* Bit `index` of an LSB-ordered validity bitmap. The first bit of a byte writes the whole byte,
 * so bytes past a rolled-back append never leak stale bits into later rows. */
static inline void put_bit(Buffer *bitmap, int64_t index, int valid) {
    uint8_t *byte = buffer_data(bitmap) + (index >> 3);
    uint8_t mask = (uint8_t)(1u << (index & 7));
    if ((index & 7) == 0) {
        *byte = valid ? mask : 0;
        bitmap->len = (Py_ssize_t)(index >> 3) + 1;
    } else if (valid) {
        *byte |= mask;
    } else {
        *byte &= (uint8_t)~mask;
    }
}

/* ---- decoding ----------------------------------------------------------------------------- */

enum { VARINT_OK = 0, VARINT_WIDE = 1, VARINT_BAD = -1 };

/* Zigzag varint of at most 10 bytes, read below `end`. VARINT_WIDE: well formed, but the value
 * needs more than 64 bits (out of int64 after zigzag); *position is then still advanced. */
static inline int read_varint(const uint8_t *data, Py_ssize_t *position, Py_ssize_t end,
                              int64_t *value) {
    Py_ssize_t at = *position;
    if (at >= end) {
        return VARINT_BAD;
    }
    uint8_t byte = data[at++];
    if (byte < 0x80) {
        *position = at;
        *value = (int64_t)(byte >> 1) ^ -(int64_t)(byte & 1);
        return VARINT_OK;
    }
    uint64_t result = byte & 0x7F;
    int wide = 0;
    for (int shift = 7; shift < 7 * MAX_VARINT_BYTES; shift += 7) {
        if (at >= end) {
            return VARINT_BAD;
        }
        byte = data[at++];
        if (shift == 63) {
            wide = (byte & 0x7E) != 0; /* bits 64..69 */
            result |= (uint64_t)(byte & 1) << 63;
        } else {
            result |= (uint64_t)(byte & 0x7F) << shift;
        }
        if (byte < 0x80) {
            *position = at;
            *value = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
            return wide ? VARINT_WIDE : VARINT_OK;
        }
    }
    return VARINT_BAD; /* longer than 10 bytes */
}

/* Well-formed UTF-8 exactly as Python's strict decoder accepts it (no surrogates, no overlong
 * forms, nothing above U+10FFFF). */
static int utf8_valid(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int more;
        uint8_t low = 0x80, high = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            if (c == 0xE0) low = 0xA0;
            if (c == 0xED) high = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            if (c == 0xF0) low = 0x90;
            if (c == 0xF4) high = 0x8F;
        } else {
            return 0;
        }
        if (more > n - i - 1) {
            return 0;
        }
        if (s[i + 1] < low || s[i + 1] > high) {
            return 0;
        }
        for (int k = 2; k <= more; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return 0;
            }
        }
        i += more + 1;
    }
    return 1;
}

static void save_state(ColumnBuilder *self, State *saved) {
    *saved = self->state;
    for (int i = 0; i < BUFFER_COUNT; i++) {
        saved->lens[i] = self->buffers[i].len;
    }
}

static void restore_state(ColumnBuilder *self, const State *saved) {
    self->state = *saved;
    for (int i = 0; i < BUFFER_COUNT; i++) {
        self->buffers[i].len = saved->lens[i];
    }
}

#define CORRUPT(message) do { error = (message); goto corrupt; } while (0)
#define RESERVE(index, extra) do { \
        if (buffer_reserve(&self->buffers[index], (extra)) < 0) goto fail; } while (0)

/* Append one binary value (or null when length < 0) to a validity/offsets/data triple;
 * validity < 0: a column that is never null (header keys). */
static int push_binary(ColumnBuilder *self, int validity, int offsets, int data, int64_t row,
                       const uint8_t *bytes, int64_t length, int64_t *nulls) {
    Buffer *data_buffer = &self->buffers[data];
    if (length < 0) {
        (*nulls)++;
        put_bit(&self->buffers[validity], row, 0); /* never reached with validity < 0 */
    } else {
        if (length > ARROW_MAX_OFFSET - data_buffer->len) {
            PyErr_SetString(PyExc_OverflowError,
                            "a column would pass Arrow's 2 GiB int32 offsets; finish() sooner");
            return -1;
        }
        if (buffer_reserve(data_buffer, (Py_ssize_t)length) < 0) {
            return -1;
        }
        memcpy(buffer_data(data_buffer) + data_buffer->len, bytes, (size_t)length);
        data_buffer->len += (Py_ssize_t)length;
        if (validity >= 0) {
            put_bit(&self->buffers[validity], row, 1);
        }
    }
    push_le32(&self->buffers[offsets], (int32_t)data_buffer->len);
    return 0;
}

static PyObject *builder_append(ColumnBuilder *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"records", "count", "base_offset", "base_timestamp",
                               "log_append_time", "start_offset", "end_offset", NULL};
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_timestamp, log_append_time, start_offset, end_offset;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nLLLLL:append", keywords, &view, &count,
                                     &base_offset, &base_timestamp, &log_append_time,
                                     &start_offset, &end_offset)) {
        return NULL;
    }
    const uint8_t *data = (const uint8_t *)view.buf;
    const Py_ssize_t size = view.len;
    const char *error = NULL;
    State saved;
    save_state(self, &saved);
    const int log_append = log_append_time >= 0;
    const int headers_wanted = self->include_headers;
    int64_t appended = 0;
    Py_ssize_t position = 0;

    if (count < 0) {
        CORRUPT("negative recordsCount");
    }
    if (count > size / MIN_RECORD_SIZE) {
        CORRUPT("the records section cannot hold recordsCount records");
    }
    /* Fixed-width columns and bitmaps for up to `count` rows, bounded by the input size. */
    RESERVE(OFFSETS, count * 8);
    RESERVE(TIMESTAMPS, count * 8);
    RESERVE(TIMESTAMP_TYPES, count * 4);
    RESERVE(KEY_VALIDITY, count / 8 + 2);
    RESERVE(KEY_OFFSETS, count * 4);
    RESERVE(VALUE_VALIDITY, count / 8 + 2);
    RESERVE(VALUE_OFFSETS, count * 4);
    if (headers_wanted) {
        RESERVE(LIST_VALIDITY, count / 8 + 2);
        RESERVE(LIST_OFFSETS, count * 4);
    }

    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, timestamp_delta, offset_delta, key_length, value_length, header_count;
        if (read_varint(data, &position, size, &length) != VARINT_OK) {
            CORRUPT("bad record length varint");
        }
        if (length < MIN_RECORD_SIZE - 1 || length > size - position) {
            CORRUPT("record length does not fit the batch");
        }
        const Py_ssize_t end = position + (Py_ssize_t)length;
        position += 1; /* attributes */
        int rc = read_varint(data, &position, end, &timestamp_delta);
        if (rc == VARINT_BAD || (rc == VARINT_WIDE && !log_append)) {
            CORRUPT("bad timestampDelta varint");
        }
        if (read_varint(data, &position, end, &offset_delta) != VARINT_OK) {
            CORRUPT("bad offsetDelta varint");
        }
        int64_t offset, timestamp;
        if (__builtin_add_overflow((int64_t)base_offset, offset_delta, &offset)) {
            CORRUPT("offset outside int64");
        }
        if (log_append) {
            timestamp = log_append_time;
        } else if (__builtin_add_overflow((int64_t)base_timestamp, timestamp_delta, &timestamp)) {
            CORRUPT("timestamp outside int64");
        }
        if (timestamp > TIMESTAMP_MS_LIMIT || timestamp < -TIMESTAMP_MS_LIMIT) {
            CORRUPT("timestamp does not fit int64 microseconds");
        }
        const int keep = offset >= start_offset && offset < end_offset;
        const int64_t row = self->state.rows;

        if (read_varint(data, &position, end, &key_length) != VARINT_OK) {
            CORRUPT("bad key length varint");
        }
        if (key_length < -1 || key_length > end - position) {
            CORRUPT("key length overruns its record");
        }
        const uint8_t *key = data + position;
        if (key_length > 0) {
            position += (Py_ssize_t)key_length;
        }
        if (read_varint(data, &position, end, &value_length) != VARINT_OK) {
            CORRUPT("bad value length varint");
        }
        if (value_length < -1 || value_length > end - position) {
            CORRUPT("value length overruns its record");
        }
        const uint8_t *value = data + position;
        if (value_length > 0) {
            position += (Py_ssize_t)value_length;
        }
        if (read_varint(data, &position, end, &header_count) != VARINT_OK) {
            CORRUPT("bad header count varint");
        }
        if (keep) {
            if (push_binary(self, KEY_VALIDITY, KEY_OFFSETS, KEY_DATA, row, key, key_length,
                            &self->state.key_nulls) < 0 ||
                push_binary(self, VALUE_VALIDITY, VALUE_OFFSETS, VALUE_DATA, row, value,
                            value_length, &self->state.value_nulls) < 0) {
                goto fail;
            }
        }
        if (header_count != 0) {
            /* Each header takes at least 2 bytes: bound the count before looping on it. */
            if (header_count < 0 || header_count > (end - position) / 2) {
                CORRUPT("header count does not fit the record");
            }
            const int store = keep && headers_wanted;
            if (store) {
                if (header_count > ARROW_MAX_OFFSET - self->state.entries) {
                    PyErr_SetString(PyExc_OverflowError, "too many header entries; finish() sooner");
                    goto fail;
                }
                RESERVE(HEADER_KEY_OFFSETS, header_count * 4);
                RESERVE(HEADER_VALUE_OFFSETS, header_count * 4);
                RESERVE(HEADER_VALUE_VALIDITY, header_count / 8 + 2);
            }
            for (int64_t h = 0; h < header_count; h++) {
                int64_t name_length, header_value_length;
                if (read_varint(data, &position, end, &name_length) != VARINT_OK) {
                    CORRUPT("bad header key length varint");
                }
                if (name_length < 0 || name_length > end - position) {
                    CORRUPT("header key length overruns its record");
                }
                const uint8_t *name = data + position;
                if (!utf8_valid(name, (Py_ssize_t)name_length)) {
                    CORRUPT("header key is not UTF-8");
                }
                position += (Py_ssize_t)name_length;
                if (read_varint(data, &position, end, &header_value_length) != VARINT_OK) {
                    CORRUPT("bad header value length varint");
                }
                if (header_value_length < -1 || header_value_length > end - position) {
                    CORRUPT("header value length overruns its record");
                }
                const uint8_t *header_value = data + position;
                if (header_value_length > 0) {
                    position += (Py_ssize_t)header_value_length;
                }
                if (store) {
                    int64_t entry = self->state.entries;
                    if (push_binary(self, HEADER_VALUE_VALIDITY, HEADER_VALUE_OFFSETS,
                                    HEADER_VALUE_DATA, entry, header_value, header_value_length,
                                    &self->state.header_value_nulls) < 0 ||
                        push_binary(self, -1, HEADER_KEY_OFFSETS, HEADER_KEY_DATA, entry, name,
                                    name_length, NULL) < 0) {
                        goto fail;
                    }
                    self->state.entries = entry + 1;
                }
            }
        }
        if (position != end) {
            CORRUPT("record length disagrees with its fields");
        }
        if (keep) {
            push_le64(&self->buffers[OFFSETS], offset);
            push_le64(&self->buffers[TIMESTAMPS], timestamp * 1000);
            push_le32(&self->buffers[TIMESTAMP_TYPES], log_append ? 1 : 0);
            if (headers_wanted) {
                int has_headers = header_count != 0;
                if (!has_headers) {
                    self->state.list_nulls++;
                }
                put_bit(&self->buffers[LIST_VALIDITY], row, has_headers);
                push_le32(&self->buffers[LIST_OFFSETS], (int32_t)self->state.entries);
            }
            self->state.rows = row + 1;
            appended++;
        }
    }
    if (position != size) {
        CORRUPT("bytes trail the last record");
    }
    PyBuffer_Release(&view);
    return PyLong_FromLongLong(appended);

corrupt:
    PyErr_SetString(corrupt_record_error, error);
fail:
    restore_state(self, &saved);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---- lifecycle and results ---------------------------------------------------------------- */

static int reset_buffers(ColumnBuilder *self) {
    for (int i = 0; i < BUFFER_COUNT; i++) {
        Buffer *buffer = &self->buffers[i];
        if (buffer->bytes == NULL) {
            buffer->bytes = PyBytes_FromStringAndSize(NULL, 256);
            if (buffer->bytes == NULL) {
                return -1;
            }
        }
        buffer->len = 0;
    }
    memset(&self->state, 0, sizeof(self->state));
    /* Arrow offsets start with 0. */
    static const int offsets[] = {KEY_OFFSETS, VALUE_OFFSETS, LIST_OFFSETS, HEADER_KEY_OFFSETS,
                                  HEADER_VALUE_OFFSETS};
    for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
        push_le32(&self->buffers[offsets[i]], 0);
    }
    return 0;
}

static int builder_init(ColumnBuilder *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"include_headers", NULL};
    int include_headers;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "p:RecordColumns", keywords, &include_headers)) {
        return -1;
    }
    self->include_headers = include_headers;
    return reset_buffers(self);
}

/* Buffers exist from tp_new on, so no method can meet a half-built object. */
static PyObject *builder_new(PyTypeObject *type, PyObject *Py_UNUSED(args),
                             PyObject *Py_UNUSED(kwargs)) {
    ColumnBuilder *self = (ColumnBuilder *)type->tp_alloc(type, 0);
    if (self != NULL && reset_buffers(self) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void builder_dealloc(ColumnBuilder *self) {
    for (int i = 0; i < BUFFER_COUNT; i++) {
        Py_CLEAR(self->buffers[i].bytes);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Hand the buffer over as bytes of exactly its length; the builder gets a fresh one, as big
 * as this one plus 1/8: the caller flushes at about the same size each time, so the next round
 * neither grows by copying nor asks the allocator again. */
static PyObject *take(Buffer *buffer) {
    Py_ssize_t capacity = buffer->len + buffer->len / 8;
    PyObject *fresh = PyBytes_FromStringAndSize(NULL, capacity < 256 ? 256 : capacity);
    if (fresh == NULL) {
        return NULL;
    }
    PyObject *taken = buffer->bytes;
    /* Shorten in place rather than realloc: the allocation keeps its size, so when the caller
     * frees it the allocator can hand the same block to the next round's fresh buffer (a
     * realloc'd or new size tends to come from fresh pages, and page faults cost more than
     * the decode). The bytes object is then just like one _PyBytes_Resize had shrunk. */
    Py_SET_SIZE(taken, buffer->len);
    PyBytes_AS_STRING(taken)[buffer->len] = '\0';
    buffer->bytes = fresh;
    buffer->len = 0;
    return taken;
}

static PyObject *take_validity(Buffer *bitmap, int64_t nulls, int64_t length) {
    if (nulls == 0) {
        bitmap->len = 0;
        Py_RETURN_NONE;
    }
    bitmap->len = (Py_ssize_t)((length + 7) / 8);
    if (length & 7) { /* clear bits past the last row (left by a rolled-back append) */
        buffer_data(bitmap)[bitmap->len - 1] &= (uint8_t)((1u << (length & 7)) - 1);
    }
    return take(bitmap);
}

static PyObject *builder_finish(ColumnBuilder *self, PyObject *Py_UNUSED(ignored)) {
    const State s = self->state;
    Buffer *b = self->buffers;
    PyObject *headers = NULL, *result = NULL;
    if (self->include_headers) {
        headers = Py_BuildValue(
            "(NLNLNNNLNN)", take_validity(&b[LIST_VALIDITY], s.list_nulls, s.rows),
            (long long)s.list_nulls, take(&b[LIST_OFFSETS]), (long long)s.entries,
            take(&b[HEADER_KEY_OFFSETS]), take(&b[HEADER_KEY_DATA]),
            take_validity(&b[HEADER_VALUE_VALIDITY], s.header_value_nulls, s.entries),
            (long long)s.header_value_nulls, take(&b[HEADER_VALUE_OFFSETS]),
            take(&b[HEADER_VALUE_DATA]));
    } else {
        headers = Py_NewRef(Py_None);
    }
    if (headers != NULL) {
        result = Py_BuildValue(
            "(LNNNNLNNNLNNN)", (long long)s.rows, take(&b[OFFSETS]), take(&b[TIMESTAMPS]),
            take(&b[TIMESTAMP_TYPES]), take_validity(&b[KEY_VALIDITY], s.key_nulls, s.rows),
            (long long)s.key_nulls, take(&b[KEY_OFFSETS]), take(&b[KEY_DATA]),
            take_validity(&b[VALUE_VALIDITY], s.value_nulls, s.rows), (long long)s.value_nulls,
            take(&b[VALUE_OFFSETS]), take(&b[VALUE_DATA]), headers);
    }
    /* Success or not (MemoryError), the builder starts over empty. */
    for (int i = 0; i < BUFFER_COUNT; i++) {
        b[i].len = 0;
    }
    memset(&self->state, 0, sizeof(self->state));
    static const int offsets[] = {KEY_OFFSETS, VALUE_OFFSETS, LIST_OFFSETS, HEADER_KEY_OFFSETS,
                                  HEADER_VALUE_OFFSETS};
    for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
        push_le32(&b[offsets[i]], 0);
    }
    return result;
}

static PyObject *builder_rows(ColumnBuilder *self, void *Py_UNUSED(closure)) {
    return PyLong_FromLongLong(self->state.rows);
}

static PyObject *builder_data_bytes(ColumnBuilder *self, void *Py_UNUSED(closure)) {
    Buffer *b = self->buffers;
    return PyLong_FromSsize_t(b[KEY_DATA].len + b[VALUE_DATA].len + b[HEADER_KEY_DATA].len +
                              b[HEADER_VALUE_DATA].len);
}

static PyMethodDef builder_methods[] = {
    {"append", (PyCFunction)(void (*)(void))builder_append, METH_VARARGS | METH_KEYWORDS,
     "append(records, count, base_offset, base_timestamp, log_append_time, start_offset, "
     "end_offset) -> rows appended"},
    {"finish", (PyCFunction)builder_finish, METH_NOARGS,
     "finish() -> tuple of the columns' buffers; the builder starts over empty"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef builder_getset[] = {
    {"rows", (getter)builder_rows, NULL, "rows appended so far", NULL},
    {"data_bytes", (getter)builder_data_bytes, NULL, "key, value and header bytes held", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ColumnBuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tidelog.records._columnar.ColumnBuilder",
    .tp_doc = "Decodes v2 records sections of one partition into Arrow column buffers.",
    .tp_basicsize = sizeof(ColumnBuilder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = builder_new,
    .tp_init = (initproc)builder_init,
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_methods = builder_methods,
    .tp_getset = builder_getset,
};

static struct PyModuleDef columnar_module = {
    PyModuleDef_HEAD_INIT, "tidelog.records._columnar",
    "Native decoder of v2 records sections into Arrow column buffers (see columnar.py).", -1,
    NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__columnar(void) {
    PyObject *errors = PyImport_ImportModule("tidelog.errors");
    if (errors == NULL) {
        return NULL;
    }
    corrupt_record_error = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (corrupt_record_error == NULL || PyType_Ready(&ColumnBuilderType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&columnar_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "ColumnBuilder", (PyObject *)&ColumnBuilderType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
