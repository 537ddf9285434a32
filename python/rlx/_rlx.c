/* _rlx.c - the CPython extension over librlx (include/rlx.h only).
 *
 * Types: _Model (an ONNX model compiled once per input shape, rlx_model),
 * _Graph (a graph under construction; builders take and return node ids),
 * _Session (a compiled graph), _DeviceBuffer (an output in CUDA memory),
 * _LLM (a decoder LLM and its generation context), _Stream (one
 * generation on a thread of its own) and _Trainer (rlx_trainer).  Each model and session has a mutex:
 * runs of one of them are serialised, runs of different ones go in
 * parallel.  The GIL is released while compiling and running; the mutex is
 * only ever waited for without the GIL, so the two cannot deadlock.
 *
 * Errors: every failed C call raises the exception class of its status
 * with rlx_last_error()'s text (read on the calling thread, where the C
 * library keeps it). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

/* ------------------------------------------------------------ errors */

static PyObject *err_base;
static PyObject *err_class[RLX_ERR_INTERNAL + 1];

static PyObject *raise_status(rlx_status st)
{
    const char *msg = rlx_last_error();
    PyObject *cls = (st > 0 && st <= RLX_ERR_INTERNAL && err_class[st]) ? err_class[st] : err_base;
    PyErr_Format(cls, "%s", msg && *msg ? msg : rlx_status_name(st));
    return NULL;
}

/* ------------------------------------------------------------ dtypes */

static int npy_of(rlx_dtype t)
{
    switch (t) {
    case RLX_F32: return NPY_FLOAT32;
    case RLX_F16: return NPY_FLOAT16;
    case RLX_BF16: return NPY_UINT16; /* bf16 travels as its bit pattern */
    case RLX_F64: return NPY_FLOAT64;
    case RLX_I64: return NPY_INT64;
    case RLX_I32: return NPY_INT32;
    case RLX_I8: return NPY_INT8;
    case RLX_U8: return NPY_UINT8;
    case RLX_BOOL: return NPY_BOOL;
    default: return -1;
    }
}

/* An array of str (dtype object) of RLX_STRING bytes: NUL-ended UTF-8
 * elements in order. */
static PyObject *string_array(int nd, const int64_t *dims, const char *data, size_t bytes)
{
    npy_intp d[RLX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        d[i] = (npy_intp)dims[i];
    PyObject *a = PyArray_SimpleNew(nd, d, NPY_OBJECT);
    if (!a)
        return NULL;
    npy_intp n = PyArray_SIZE((PyArrayObject *)a);
    PyObject **item = PyArray_DATA((PyArrayObject *)a);
    const char *p = data, *end = data + bytes;
    for (npy_intp i = 0; i < n; i++) {
        size_t l = p < end ? strnlen(p, (size_t)(end - p)) : 0;
        if (p >= end || p + l == end) {
            Py_DECREF(a);
            return PyErr_Format(PyExc_ValueError, "a tensor of strings holds fewer than %zd strings", (Py_ssize_t)n);
        }
        PyObject *str = PyUnicode_DecodeUTF8(p, (Py_ssize_t)l, "replace");
        if (!str) {
            Py_DECREF(a);
            return NULL;
        }
        Py_XSETREF(item[i], str);
        p += l + 1;
    }
    return a;
}

static int rlx_of_npy(int npy)
{
    switch (npy) {
    case NPY_FLOAT32: return RLX_F32;
    case NPY_FLOAT16: return RLX_F16;
    case NPY_FLOAT64: return RLX_F64;
    case NPY_INT64: return RLX_I64;
    case NPY_INT32: return RLX_I32;
    case NPY_INT8: return RLX_I8;
    case NPY_UINT8: return RLX_U8;
    case NPY_BOOL: return RLX_BOOL;
    case NPY_UINT16: return RLX_BF16;
    default:
        if (npy == NPY_LONGLONG && sizeof(long long) == 8)
            return RLX_I64;
        if (npy == NPY_LONG && sizeof(long) == 8)
            return RLX_I64;
        return -1;
    }
}

/* ------------------------------------------------------------ DLPack
 * The DLPack ABI (v0.x), as the protocol defines it. */

typedef struct {
    int32_t device_type, device_id;
} dl_device;
typedef struct {
    uint8_t code, bits;
    uint16_t lanes;
} dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
    dl_tensor t;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *);
} dl_managed;
enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3 };
enum { DL_INT = 0, DL_UINT = 1, DL_FLOAT = 2, DL_BFLOAT = 4, DL_BOOL = 6 };

typedef struct {
    dl_managed m;
    PyObject *owner; /* the array whose memory is lent */
    int64_t dims[2 * NPY_MAXDIMS];
} export_ctx;

static void export_deleter(dl_managed *m)
{
    export_ctx *c = (export_ctx *)m;
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(c->owner);
    PyMem_RawFree(c);
    PyGILState_Release(g);
}

static void capsule_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) { /* never consumed */
        dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter)
            m->deleter(m);
    } else {
        PyErr_Clear();
    }
}

/* A "dltensor" capsule lending `data` (kept alive by a reference to owner);
 * strides in elements, NULL for dense row-major. */
static PyObject *make_capsule(PyObject *owner, void *data, dl_device dev, int nd, const int64_t *dims,
                              const int64_t *strides, dl_dtype dt)
{
    if (nd < 0 || nd > NPY_MAXDIMS)
        return PyErr_Format(PyExc_BufferError, "DLPack export: rank %d", nd);
    export_ctx *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c)
        return PyErr_NoMemory();
    Py_INCREF(owner);
    c->owner = owner;
    c->m.t.data = data;
    c->m.t.device = dev;
    c->m.t.ndim = nd;
    c->m.t.dtype = dt;
    c->m.t.shape = c->dims;
    c->m.t.strides = c->dims + NPY_MAXDIMS;
    int64_t step = 1;
    for (int i = nd - 1; i >= 0; i--) {
        c->dims[i] = dims[i];
        c->dims[NPY_MAXDIMS + i] = strides ? strides[i] : step;
        step *= dims[i];
    }
    c->m.manager_ctx = c;
    c->m.deleter = export_deleter;
    PyObject *cap = PyCapsule_New(&c->m, "dltensor", capsule_destructor);
    if (!cap) {
        Py_DECREF(owner);
        PyMem_RawFree(c);
    }
    return cap;
}

/* _to_dlpack(ndarray) -> capsule "dltensor" lending the array's memory. */
static PyObject *py_to_dlpack(PyObject *self, PyObject *arg)
{
    (void)self;
    if (!PyArray_Check(arg))
        return PyErr_Format(PyExc_TypeError, "_to_dlpack needs a numpy array, got %s", Py_TYPE(arg)->tp_name);
    PyArrayObject *a = (PyArrayObject *)arg;
    dl_dtype dt = {0, (uint8_t)(PyArray_ITEMSIZE(a) * 8), 1};
    switch (PyArray_TYPE(a)) {
    case NPY_FLOAT16:
    case NPY_FLOAT32:
    case NPY_FLOAT64: dt.code = DL_FLOAT; break;
    case NPY_INT8:
    case NPY_INT16:
    case NPY_INT32:
    case NPY_INT64:
    case NPY_LONGLONG: dt.code = DL_INT; break;
    case NPY_UINT8:
    case NPY_UINT16:
    case NPY_UINT32:
    case NPY_UINT64: dt.code = DL_UINT; break;
    case NPY_BOOL: dt.code = DL_BOOL; break;
    default:
        return PyErr_Format(PyExc_TypeError, "DLPack export: dtype %s has no DLPack code here",
                            PyArray_DESCR(a)->typeobj->tp_name);
    }
    int nd = PyArray_NDIM(a);
    int64_t dims[NPY_MAXDIMS], strides[NPY_MAXDIMS];
    for (int i = 0; i < nd; i++) {
        dims[i] = PyArray_DIM(a, i);
        strides[i] = PyArray_STRIDE(a, i) / PyArray_ITEMSIZE(a);
        if (PyArray_STRIDE(a, i) % PyArray_ITEMSIZE(a))
            return PyErr_Format(PyExc_BufferError, "DLPack export: strides that are not whole elements");
    }
    return make_capsule(arg, PyArray_DATA(a), (dl_device){DL_CPU, 0}, nd, dims, strides, dt);
}

/* Keeps an imported DLManagedTensor alive as an array's base. */
static void imported_free(PyObject *cap)
{
    dl_managed *m = PyCapsule_GetPointer(cap, "rlx.dlpack_import");
    if (m && m->deleter)
        m->deleter(m);
}

/* _from_dlpack_capsule(capsule) -> ndarray over the same memory. */
static PyObject *py_from_dlpack_capsule(PyObject *self, PyObject *cap)
{
    (void)self;
    if (!PyCapsule_IsValid(cap, "dltensor"))
        return PyErr_Format(PyExc_TypeError, "from_dlpack: expected an unconsumed 'dltensor' capsule");
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    dl_tensor *t = &m->t;
    if (t->device.device_type == DL_CUDA)
        return PyErr_Format(err_class[RLX_ERR_UNSUPPORTED],
                            "from_dlpack: the tensor is in CUDA memory (device %d); numpy arrays are host memory, so "
                            "copy it to the host first (e.g. tensor.cpu()), or give it to run() of a CUDA session",
                            (int)t->device.device_id);
    if (t->device.device_type != DL_CPU && t->device.device_type != DL_CUDA_HOST)
        return PyErr_Format(err_class[RLX_ERR_UNSUPPORTED], "from_dlpack: device type %d is not host memory",
                            (int)t->device.device_type);
    if (t->ndim < 0 || t->ndim > NPY_MAXDIMS || t->dtype.lanes != 1)
        return PyErr_Format(PyExc_ValueError, "from_dlpack: rank %d or %d lanes not supported", (int)t->ndim,
                            (int)t->dtype.lanes);
    int npy = -1;
    switch (t->dtype.code) {
    case DL_FLOAT:
        npy = t->dtype.bits == 16   ? NPY_FLOAT16
              : t->dtype.bits == 32 ? NPY_FLOAT32
              : t->dtype.bits == 64 ? NPY_FLOAT64
                                    : -1;
        break;
    case DL_INT:
        npy = t->dtype.bits == 8    ? NPY_INT8
              : t->dtype.bits == 16 ? NPY_INT16
              : t->dtype.bits == 32 ? NPY_INT32
              : t->dtype.bits == 64 ? NPY_INT64
                                    : -1;
        break;
    case DL_UINT:
        npy = t->dtype.bits == 8    ? NPY_UINT8
              : t->dtype.bits == 16 ? NPY_UINT16
              : t->dtype.bits == 32 ? NPY_UINT32
              : t->dtype.bits == 64 ? NPY_UINT64
                                    : -1;
        break;
    case DL_BOOL: npy = t->dtype.bits == 8 ? NPY_BOOL : -1; break;
    case DL_BFLOAT: npy = t->dtype.bits == 16 ? NPY_UINT16 : -1; break; /* bf16 bits */
    }
    if (npy < 0)
        return PyErr_Format(PyExc_TypeError, "from_dlpack: dtype code %d, %d bits not supported", t->dtype.code,
                            t->dtype.bits);
    npy_intp dims[NPY_MAXDIMS], strides[NPY_MAXDIMS];
    int item = (t->dtype.bits + 7) / 8;
    for (int i = t->ndim - 1; i >= 0; i--) {
        dims[i] = (npy_intp)t->shape[i];
        strides[i] =
            t->strides ? (npy_intp)t->strides[i] * item : (i == t->ndim - 1 ? item : strides[i + 1] * dims[i + 1]);
    }
    PyObject *owner = PyCapsule_New(m, "rlx.dlpack_import", imported_free);
    if (!owner)
        return NULL;
    if (PyCapsule_SetName(cap, "used_dltensor") != 0) { /* consumed: the producer's capsule must not free it */
        PyCapsule_SetDestructor(owner, NULL);
        Py_DECREF(owner);
        return NULL;
    }
    PyObject *arr = PyArray_New(&PyArray_Type, t->ndim, dims, npy, strides, (char *)t->data + t->byte_offset, 0,
                                NPY_ARRAY_WRITEABLE, NULL);
    if (!arr) {
        Py_DECREF(owner);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, owner) != 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* ------------------------------------------------------------ inputs */

typedef struct {
    const char *name;   /* borrowed from the session/model */
    PyArrayObject *arr; /* a C-contiguous array of the right dtype (a reference held), or NULL for: */
    PyObject *cap;      /* a CUDA tensor's DLPack capsule (held, not consumed: its producer frees it) */
    const void *dptr;   /* its device pointer and size */
    size_t dbytes;
    int nd;
    int64_t dims[RLX_MAX_DIMS];
} prepared;

static int p_ndim(const prepared *p) { return p->arr ? PyArray_NDIM(p->arr) : p->nd; }
static int64_t p_dim(const prepared *p, int d) { return p->arr ? (int64_t)PyArray_DIM(p->arr, d) : p->dims[d]; }

/* The DLPack dtype of an RLX dtype (bf16 as kDLBfloat). */
static dl_dtype dl_of_rlx(rlx_dtype t)
{
    dl_dtype d = {DL_FLOAT, (uint8_t)(rlx_dtype_size(t) * 8), 1};
    switch (t) {
    case RLX_BF16: d.code = DL_BFLOAT; break;
    case RLX_I64:
    case RLX_I32:
    case RLX_I8: d.code = DL_INT; break;
    case RLX_U8: d.code = DL_UINT; break;
    case RLX_BOOL: d.code = DL_BOOL; break;
    default: break;
    }
    return d;
}

/* The device type of an object with __dlpack_device__ (0 when it has none
 * or it fails: then it is read as host memory). */
static int dlpack_device_of(PyObject *v, int *dev_id)
{
    *dev_id = 0;
    if (PyArray_Check(v) || !PyObject_HasAttrString(v, "__dlpack_device__"))
        return 0;
    PyObject *r = PyObject_CallMethod(v, "__dlpack_device__", NULL);
    int type = 0;
    if (r && PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 2) {
        type = (int)PyLong_AsLong(PyTuple_GET_ITEM(r, 0));
        *dev_id = (int)PyLong_AsLong(PyTuple_GET_ITEM(r, 1));
    }
    Py_XDECREF(r);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        type = 0;
    }
    return type;
}

/* A CUDA tensor (DLPack kDLCUDA) as input `name`: its capsule, asked for
 * with stream 1 (the producer orders its work before CUDA's legacy default
 * stream, which the copy in rlx_session_set_input_device follows), kept
 * until the run is over; dense row-major, the input's dtype. */
static int as_device_input(PyObject *v, const char *name, rlx_dtype t, int dev_id, int index, prepared *p)
{
    if (dev_id != index) {
        PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT],
                     "input '%s' is on CUDA device %d; the session runs on cuda:%d (copy it there first)", name, dev_id,
                     index);
        return -1;
    }
    PyObject *meth = PyObject_GetAttrString(v, "__dlpack__");
    PyObject *args = meth ? PyTuple_New(0) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:i}", "stream", 1) : NULL;
    PyObject *cap = kw ? PyObject_Call(meth, args, kw) : NULL;
    Py_XDECREF(meth);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (!cap)
        return -1;
    if (!PyCapsule_IsValid(cap, "dltensor")) {
        Py_DECREF(cap);
        PyErr_Format(PyExc_TypeError, "input '%s': __dlpack__ did not return a 'dltensor' capsule", name);
        return -1;
    }
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    dl_tensor *dt = &m->t;
    dl_dtype want = dl_of_rlx(t);
    const char *why = NULL;
    char buf[160];
    if (dt->device.device_type != DL_CUDA || dt->device.device_id != index) {
        snprintf(buf, sizeof buf, "its capsule is on device type %d, id %d", (int)dt->device.device_type,
                 (int)dt->device.device_id);
        why = buf;
    } else if (dt->ndim < 0 || dt->ndim > RLX_MAX_DIMS) {
        snprintf(buf, sizeof buf, "rank %d (RLX takes up to %d dims)", (int)dt->ndim, RLX_MAX_DIMS);
        why = buf;
    }
    if (why) {
        Py_DECREF(cap);
        PyErr_Format(err_class[RLX_ERR_SHAPE], "input '%s': %s", name, why);
        return -1;
    }
    if (dt->dtype.code != want.code || dt->dtype.bits != want.bits || dt->dtype.lanes != 1) {
        Py_DECREF(cap);
        PyErr_Format(err_class[RLX_ERR_DTYPE],
                     "input '%s' must be %s, got a CUDA tensor of DLPack type code %d, %d bits", name,
                     rlx_dtype_name(t), (int)dt->dtype.code, (int)dt->dtype.bits);
        return -1;
    }
    int64_t expect = 1;
    size_t n = 1;
    for (int d = dt->ndim - 1; d >= 0; d--) {
        if (dt->strides && dt->shape[d] != 1 && dt->strides[d] != expect) {
            Py_DECREF(cap);
            PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT],
                         "input '%s': a CUDA tensor that is not dense row-major (call .contiguous() first)", name);
            return -1;
        }
        expect *= dt->shape[d];
        n *= (size_t)dt->shape[d];
    }
    p->cap = cap;
    p->dptr = (const char *)dt->data + dt->byte_offset;
    p->dbytes = n * rlx_dtype_size(t);
    p->nd = dt->ndim;
    for (int d = 0; d < dt->ndim; d++)
        p->dims[d] = dt->shape[d];
    return 0;
}

/* An input as a C-contiguous array of dtype t, without a copy when it is
 * one already.  Non-contiguous arrays are copied; other dtypes are an
 * error naming the input; objects with __dlpack__ and buffers are viewed. */
static PyArrayObject *as_input(PyObject *v, const char *name, rlx_dtype t)
{
    PyObject *src = v;
    PyObject *tmp = NULL;
    if (!PyArray_Check(v) && PyObject_HasAttrString(v, "__dlpack__")) {
        PyObject *cap = PyObject_CallMethod(v, "__dlpack__", NULL);
        if (!cap)
            return NULL;
        tmp = py_from_dlpack_capsule(NULL, cap);
        Py_DECREF(cap);
        if (!tmp)
            return NULL;
        src = tmp;
    }
    int want = npy_of(t);
    PyArrayObject *a;
    if (PyArray_Check(src)) {
        a = (PyArrayObject *)src;
        int have = rlx_of_npy(PyArray_TYPE(a));
        if (have != (int)t) {
            PyErr_Format(err_class[RLX_ERR_DTYPE], "input '%s' must be %s%s, got a numpy array of dtype %s", name,
                         rlx_dtype_name(t), t == RLX_BF16 ? " (as uint16 bit patterns)" : "",
                         PyArray_DESCR(a)->typeobj->tp_name);
            Py_XDECREF(tmp);
            return NULL;
        }
        Py_INCREF(a);
        if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || PyArray_ISBYTESWAPPED(a)) {
            PyArrayObject *c = (PyArrayObject *)PyArray_FromArray(
                a, PyArray_DescrFromType(want), NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_ENSURECOPY);
            Py_DECREF(a);
            a = c;
        }
    } else {
        /* a buffer or a (nested) sequence: converted to the input's dtype */
        a = (PyArrayObject *)PyArray_FromAny(src, PyArray_DescrFromType(want), 0, 0,
                                             NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
        if (!a && PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            PyObject *s = ev ? PyObject_Str(ev) : NULL;
            PyErr_Format(err_class[RLX_ERR_DTYPE], "input '%s': cannot be read as %s: %s", name, rlx_dtype_name(t),
                         s ? PyUnicode_AsUTF8(s) : "?");
            Py_XDECREF(s);
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
        }
    }
    Py_XDECREF(tmp);
    return a;
}

static void release_prepared(prepared *p, int n)
{
    for (int i = 0; i < n; i++) {
        Py_XDECREF(p[i].arr);
        Py_XDECREF(p[i].cap);
    }
}

static int any_device_input(const prepared *p, int n)
{
    for (int i = 0; i < n; i++)
        if (p[i].cap)
            return 1;
    return 0;
}

static const char *shape_text(char *buf, size_t cap, int nd, const int64_t *d)
{
    size_t len = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < nd && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, i ? ", %lld" : "%lld", (long long)d[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, nd == 1 ? ",)" : ")");
    return buf;
}

/* Checks the dict against the declared inputs (n, names, dtypes, ndim and
 * dims with -1 unknown); fills p (n entries, arr NULL where declared but
 * optional and absent is not allowed: every input is required). */
static int prepare_inputs(rlx_device device, int index, PyObject *feeds, int n, const char *const *names,
                          const rlx_dtype *dtypes, const int *ndims, const int64_t (*dims)[RLX_MAX_DIMS], prepared *p)
{
    if (!PyDict_Check(feeds)) {
        PyErr_Format(PyExc_TypeError, "inputs must be a dict {name: array}, got %s", Py_TYPE(feeds)->tp_name);
        return -1;
    }
    memset(p, 0, sizeof *p * (size_t)n);
    int found = 0;
    for (int i = 0; i < n; i++) {
        PyObject *v = PyDict_GetItemString(feeds, names[i]);
        if (!v) {
            PyErr_Format(err_class[RLX_ERR_NOT_FOUND], "input '%s' is missing (the model takes %d input%s)", names[i],
                         n, n == 1 ? "" : "s");
            goto fail;
        }
        found++;
        p[i].name = names[i];
        int dev_id, dev = dlpack_device_of(v, &dev_id);
        if (dev == DL_CUDA) {
            if (device != RLX_DEVICE_CUDA) {
                PyErr_Format(err_class[RLX_ERR_UNSUPPORTED],
                             "input '%s' is a CUDA tensor; the session runs on the cpu: copy it to the host first "
                             "(e.g. tensor.cpu()) or use device='cuda'",
                             names[i]);
                goto fail;
            }
            if (as_device_input(v, names[i], dtypes[i], dev_id, index, &p[i]) != 0)
                goto fail;
        } else if (!(p[i].arr = as_input(v, names[i], dtypes[i]))) {
            goto fail;
        }
        if (ndims[i] >= 0) {
            int nd = p_ndim(&p[i]);
            int ok = nd == ndims[i];
            for (int d = 0; ok && d < nd; d++)
                ok = dims[i][d] < 0 || dims[i][d] == p_dim(&p[i], d);
            if (!ok) {
                char want[256], got[256];
                int64_t g[NPY_MAXDIMS];
                for (int d = 0; d < nd && d < NPY_MAXDIMS; d++)
                    g[d] = p_dim(&p[i], d);
                char *w = want;
                size_t len = (size_t)snprintf(w, sizeof want, "(");
                for (int d = 0; d < ndims[i]; d++) {
                    if (dims[i][d] < 0)
                        len += (size_t)snprintf(w + len, sizeof want - len, d ? ", ?" : "?");
                    else
                        len +=
                            (size_t)snprintf(w + len, sizeof want - len, d ? ", %lld" : "%lld", (long long)dims[i][d]);
                }
                snprintf(w + len, sizeof want - len, ndims[i] == 1 ? ",)" : ")");
                PyErr_Format(err_class[RLX_ERR_SHAPE], "input '%s' must have shape %s, got %s", names[i], want,
                             shape_text(got, sizeof got, nd, g));
                goto fail;
            }
        }
    }
    if (found != (int)PyDict_Size(feeds)) {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(feeds, &pos, &k, &v)) {
            const char *ks = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
            if (!ks) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "input names must be str");
                goto fail;
            }
            int known = 0;
            for (int i = 0; i < n && !known; i++)
                known = !strcmp(ks, names[i]);
            if (!known) {
                PyErr_Format(err_class[RLX_ERR_NOT_FOUND], "'%s' is not an input of the model", ks);
                goto fail;
            }
        }
    }
    return 0;
fail:
    release_prepared(p, n);
    memset(p, 0, sizeof *p * (size_t)n);
    return -1;
}

/* Sets inputs and runs; called without the GIL, the session's lock held. */
static rlx_status set_and_run(rlx_session *s, const prepared *p, int n)
{
    for (int i = 0; i < n; i++) {
        if (!p[i].arr && !p[i].cap)
            continue;
        /* an input bound by value is set too: the session checks that the
         * value is the one it was compiled for */
        rlx_status st =
            p[i].cap ? rlx_session_set_input_device(s, p[i].name, p[i].dptr, p[i].dbytes)
                     : rlx_session_set_input(s, p[i].name, PyArray_DATA(p[i].arr), (size_t)PyArray_NBYTES(p[i].arr));
        if (st == RLX_ERR_NOT_FOUND)
            continue; /* an input the graph does not read */
        if (st != RLX_OK)
            return st;
    }
    return rlx_session_run(s);
}

/* ------------------------------------------------------------ _DeviceBuffer
 * An output copied into device memory of its own (rlx_device_alloc), lent
 * through DLPack; freed when the last reference (the buffer object or a
 * capsule's) goes. */

typedef struct {
    PyObject_HEAD void *ptr;
    int index; /* cuda:index */
    size_t bytes;
    rlx_dtype dtype;
    int nd;
    int64_t dims[RLX_MAX_DIMS];
} DeviceBufObject;

static void devbuf_dealloc(DeviceBufObject *self)
{
    rlx_device_free(RLX_DEVICE_CUDA, self->index, self->ptr);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *devbuf_dlpack(DeviceBufObject *self, PyObject *noargs)
{
    (void)noargs;
    return make_capsule((PyObject *)self, self->ptr, (dl_device){DL_CUDA, self->index}, self->nd, self->dims, NULL,
                        dl_of_rlx(self->dtype));
}

static PyObject *devbuf_info(DeviceBufObject *self, PyObject *noargs)
{
    (void)noargs;
    PyObject *shape = PyTuple_New(self->nd);
    for (int d = 0; shape && d < self->nd; d++)
        PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(self->dims[d]));
    return shape ? Py_BuildValue("(Nsni)", shape, rlx_dtype_name(self->dtype), (Py_ssize_t)self->bytes, self->index)
                 : NULL;
}

static PyMethodDef devbuf_methods[] = {
    {"dlpack", (PyCFunction)devbuf_dlpack, METH_NOARGS, "a 'dltensor' capsule of the memory (kDLCUDA, its device)"},
    {"info", (PyCFunction)devbuf_info, METH_NOARGS, "(shape, dtype name, bytes, cuda device index)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject DeviceBufType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rlx._rlx._DeviceBuffer",
    .tp_basicsize = sizeof(DeviceBufObject),
    .tp_dealloc = (destructor)devbuf_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An output in CUDA device memory (internal; see rlx.DeviceTensor).",
    .tp_methods = devbuf_methods,
};

/* An output of strings (RLX_STRING) as an array of str. */
static PyObject *session_strings(rlx_session *s, const rlx_tensor_info *ti)
{
    char *buf = malloc(ti->bytes ? ti->bytes : 1);
    if (!buf)
        return PyErr_NoMemory();
    rlx_status st = rlx_session_get_output(s, ti->name, buf, ti->bytes);
    PyObject *a = st == RLX_OK ? string_array(ti->ndim, ti->dims, buf, ti->bytes) : raise_status(st);
    free(buf);
    return a;
}

/* Output `ti` copied into new device memory (GIL held, the lock held). */
static PyObject *device_output(rlx_session *s, int index, const rlx_tensor_info *ti)
{
    void *ptr = NULL;
    rlx_status st = rlx_device_alloc(RLX_DEVICE_CUDA, index, ti->bytes, &ptr);
    if (st == RLX_OK)
        st = rlx_session_get_output_device(s, ti->name, ptr, ti->bytes);
    if (st != RLX_OK) {
        rlx_device_free(RLX_DEVICE_CUDA, index, ptr);
        return raise_status(st);
    }
    DeviceBufObject *o = PyObject_New(DeviceBufObject, &DeviceBufType);
    if (!o) {
        rlx_device_free(RLX_DEVICE_CUDA, index, ptr);
        return NULL;
    }
    o->ptr = ptr;
    o->index = index;
    o->bytes = ti->bytes;
    o->dtype = ti->dtype;
    o->nd = ti->ndim;
    memcpy(o->dims, ti->dims, sizeof o->dims);
    return (PyObject *)o;
}

/* The outputs as new arrays, or as device buffers when on_device (GIL
 * held, the lock held). */
static PyObject *collect_outputs(rlx_session *s, PyObject *names, int on_device, int index)
{
    int n;
    PyObject *list = NULL;
    if (names == Py_None) {
        n = rlx_session_count(s, 2);
    } else {
        if (!PyList_Check(names) && !PyTuple_Check(names))
            return PyErr_Format(PyExc_TypeError, "output_names must be a list of str or None");
        n = (int)PySequence_Size(names);
    }
    list = PyList_New(n);
    if (!list)
        return NULL;
    for (int i = 0; i < n; i++) {
        rlx_tensor_info ti;
        rlx_status st;
        if (names == Py_None) {
            st = rlx_session_info(s, 2, i, &ti);
        } else {
            PyObject *o = PySequence_Fast_GET_ITEM(names, i);
            const char *nm = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
            if (!nm) {
                Py_DECREF(list);
                return PyErr_Format(PyExc_TypeError, "output names must be str");
            }
            st = rlx_session_find(s, 2, nm, &ti);
        }
        if (st != RLX_OK) {
            Py_DECREF(list);
            return raise_status(st);
        }
        if (ti.dtype == RLX_STRING) { /* strings the import computed: host only */
            PyObject *o = session_strings(s, &ti);
            if (!o) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SET_ITEM(list, i, o);
            continue;
        }
        if (on_device) {
            PyObject *o = device_output(s, index, &ti);
            if (!o) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SET_ITEM(list, i, o);
            continue;
        }
        npy_intp d[RLX_MAX_DIMS];
        for (int k = 0; k < ti.ndim; k++)
            d[k] = (npy_intp)ti.dims[k];
        PyObject *arr = PyArray_SimpleNew(ti.ndim, d, npy_of(ti.dtype));
        if (!arr) {
            Py_DECREF(list);
            return NULL;
        }
        if ((st = rlx_session_get_output(s, ti.name, PyArray_DATA((PyArrayObject *)arr), ti.bytes)) != RLX_OK) {
            Py_DECREF(arr);
            Py_DECREF(list);
            return raise_status(st);
        }
        PyList_SET_ITEM(list, i, arr);
    }
    return list;
}

/* ------------------------------------------------------------ options */

/* "cpu", "cuda", "cuda:N" through the library's parser. */
static int parse_device(const char *text, rlx_device *device, int *index)
{
    rlx_status st = rlx_device_parse(text, device, index);
    if (st != RLX_OK) {
        raise_status(st);
        return -1;
    }
    return 0;
}

static int parse_options(rlx_options *o, const char *device, int precision, int threads, int report)
{
    rlx_options_init(o);
    if (precision < 0 || precision > 2 || threads < 0) {
        PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT], "bad precision %d or threads %d", precision, threads);
        return -1;
    }
    if (parse_device(device, &o->device, &o->device_index) != 0)
        return -1;
    o->precision = (rlx_precision)precision;
    o->threads = threads;
    if (report)
        o->dispatch_report = 2;
    return 0;
}

/* ------------------------------------------------------------ _Session */

typedef struct {
    PyObject_HEAD rlx_session *s;
    pthread_mutex_t lock;
    int n_in;
    char **in_names;
    rlx_dtype *in_dtypes;
    int *in_ndims;
    int64_t (*in_dims)[RLX_MAX_DIMS];
    rlx_device device;
    int device_index;
} SessionObject;

static PyTypeObject SessionType;

static void session_dealloc(SessionObject *self)
{
    rlx_session_free(self->s);
    for (int i = 0; i < self->n_in; i++)
        free(self->in_names[i]);
    free(self->in_names);
    free(self->in_dtypes);
    free(self->in_ndims);
    free(self->in_dims);
    pthread_mutex_destroy(&self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *session_wrap(rlx_session *s, rlx_device device, int index)
{
    SessionObject *o = PyObject_New(SessionObject, &SessionType);
    if (!o) {
        rlx_session_free(s);
        return NULL;
    }
    o->s = s;
    o->device = device;
    o->device_index = index;
    pthread_mutex_init(&o->lock, NULL);
    int n = rlx_session_count(s, 0);
    o->n_in = 0;
    o->in_names = calloc((size_t)n + 1, sizeof *o->in_names);
    o->in_dtypes = calloc((size_t)n + 1, sizeof *o->in_dtypes);
    o->in_ndims = calloc((size_t)n + 1, sizeof *o->in_ndims);
    o->in_dims = calloc((size_t)n + 1, sizeof *o->in_dims);
    if (!o->in_names || !o->in_dtypes || !o->in_ndims || !o->in_dims) {
        Py_DECREF(o);
        return PyErr_NoMemory();
    }
    for (int i = 0; i < n; i++) {
        rlx_tensor_info ti;
        rlx_session_info(s, 0, i, &ti);
        if (!(o->in_names[i] = strdup(ti.name))) {
            Py_DECREF(o);
            return PyErr_NoMemory();
        }
        o->n_in++;
        o->in_dtypes[i] = ti.dtype;
        o->in_ndims[i] = ti.ndim;
        memcpy(o->in_dims[i], ti.dims, sizeof ti.dims);
    }
    return (PyObject *)o;
}

static PyObject *session_run(SessionObject *self, PyObject *args)
{
    PyObject *feeds, *names = Py_None;
    int on_device = 0;
    if (!PyArg_ParseTuple(args, "O|Op", &feeds, &names, &on_device))
        return NULL;
    prepared p[64];
    prepared *pp = self->n_in <= 64 ? p : calloc((size_t)self->n_in, sizeof *pp);
    if (!pp)
        return PyErr_NoMemory();
    PyObject *res = NULL;
    if (prepare_inputs(self->device, self->device_index, feeds, self->n_in, (const char *const *)self->in_names,
                       self->in_dtypes, self->in_ndims, (const int64_t(*)[RLX_MAX_DIMS])self->in_dims, pp) == 0) {
        rlx_status st;
        Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
        st = set_and_run(self->s, pp, self->n_in);
        Py_END_ALLOW_THREADS res =
            st == RLX_OK ? collect_outputs(self->s, names, on_device, self->device_index) : raise_status(st);
        pthread_mutex_unlock(&self->lock);
        release_prepared(pp, self->n_in);
    }
    if (pp != p)
        free(pp);
    return res;
}

static PyObject *session_set_param(SessionObject *self, PyObject *args)
{
    const char *name;
    PyObject *v;
    if (!PyArg_ParseTuple(args, "sO", &name, &v))
        return NULL;
    rlx_tensor_info ti;
    rlx_status st = rlx_session_find(self->s, 1, name, &ti);
    if (st != RLX_OK)
        return raise_status(st);
    PyArrayObject *a = as_input(v, name, ti.dtype);
    if (!a)
        return NULL;
    if ((size_t)PyArray_NBYTES(a) != ti.bytes) {
        char want[256], got[256];
        int64_t g[NPY_MAXDIMS];
        for (int d = 0; d < PyArray_NDIM(a); d++)
            g[d] = PyArray_DIM(a, d);
        PyErr_Format(err_class[RLX_ERR_SHAPE], "param '%s' must have shape %s, got %s", name,
                     shape_text(want, sizeof want, ti.ndim, ti.dims), shape_text(got, sizeof got, PyArray_NDIM(a), g));
        Py_DECREF(a);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    st = rlx_session_set_param(self->s, name, PyArray_DATA(a), (size_t)PyArray_NBYTES(a));
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS Py_DECREF(a);
    if (st != RLX_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *info_list(const rlx_session *s, int kind)
{
    int n = rlx_session_count(s, kind);
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        rlx_tensor_info ti;
        rlx_session_info(s, kind, i, &ti);
        PyObject *shape = PyTuple_New(ti.ndim);
        for (int d = 0; shape && d < ti.ndim; d++)
            PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(ti.dims[d]));
        PyObject *t = shape ? Py_BuildValue("(sNs)", ti.name, shape, rlx_dtype_name(ti.dtype)) : NULL;
        if (!t) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, t);
    }
    return l;
}

static PyObject *session_info(SessionObject *self, PyObject *args)
{
    int kind;
    if (!PyArg_ParseTuple(args, "i", &kind))
        return NULL;
    if (kind < 0 || kind > 2)
        return PyErr_Format(PyExc_ValueError, "kind must be 0, 1 or 2");
    return info_list(self->s, kind);
}

static PyObject *session_report(SessionObject *self, PyObject *noargs)
{
    (void)noargs;
    return PyUnicode_FromString(rlx_session_report(self->s));
}

static PyObject *dot_result(rlx_status st, char *text)
{
    if (st != RLX_OK)
        return raise_status(st);
    PyObject *r = PyUnicode_FromString(text);
    rlx_free(text);
    return r;
}

static PyObject *session_to_dot(SessionObject *self, PyObject *args)
{
    const char *title = NULL;
    if (!PyArg_ParseTuple(args, "|z", &title))
        return NULL;
    char *text = NULL;
    rlx_status st = rlx_session_to_dot(self->s, title, &text);
    return dot_result(st, text);
}

static PyObject *session_stats(SessionObject *self, PyObject *noargs)
{
    (void)noargs;
    rlx_compile_stats st;
    rlx_session_stats(self->s, &st);
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:n,s:n,s:n,s:i,s:i}", "nodes_in", st.nodes_in, "nodes_after_simplify",
                         st.nodes_after_simplify, "nodes_after_fusion", st.nodes_after_fusion, "nodes_final",
                         st.nodes_final, "arena_bytes", (Py_ssize_t)st.arena_bytes, "persistent_bytes",
                         (Py_ssize_t)st.persistent_bytes, "transient_bytes", (Py_ssize_t)st.transient_bytes, "thunks",
                         st.thunks, "buffers", st.buffers);
}

static PyObject *session_set_workload_params(SessionObject *self, PyObject *args)
{
    unsigned long long seed = 1;
    if (!PyArg_ParseTuple(args, "|K", &seed))
        return NULL;
    rlx_status st;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    st = rlx_workload_set_params(self->s, seed);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS if (st != RLX_OK) return raise_status(st);
    Py_RETURN_NONE;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* _bench_c(inputs, n): seconds per set-inputs + run + get-outputs through
 * the C API alone, inputs as given, outputs into reused buffers. */
static PyObject *session_bench_c(SessionObject *self, PyObject *args)
{
    PyObject *feeds;
    int n;
    if (!PyArg_ParseTuple(args, "Oi", &feeds, &n))
        return NULL;
    prepared pp[64];
    if (self->n_in > 64)
        return PyErr_Format(PyExc_ValueError, "too many inputs");
    if (prepare_inputs(self->device, self->device_index, feeds, self->n_in, (const char *const *)self->in_names,
                       self->in_dtypes, self->in_ndims, (const int64_t(*)[RLX_MAX_DIMS])self->in_dims, pp) != 0)
        return NULL;
    if (any_device_input(pp, self->n_in)) {
        release_prepared(pp, self->n_in);
        return PyErr_Format(err_class[RLX_ERR_UNSUPPORTED], "_bench_c takes host inputs only");
    }
    int no = rlx_session_count(self->s, 2);
    void *bufs[64] = {0};
    rlx_tensor_info oi[64];
    for (int i = 0; i < no && i < 64; i++) {
        rlx_session_info(self->s, 2, i, &oi[i]);
        bufs[i] = malloc(oi[i].bytes + 1);
    }
    rlx_status st = RLX_OK;
    double t0 = 0, t1 = 0;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    for (int r = -1; r < n && st == RLX_OK; r++) {
        if (r == 0)
            t0 = now_s();
        for (int i = 0; i < self->n_in && st == RLX_OK; i++)
            st = rlx_session_set_input(self->s, pp[i].name, PyArray_DATA(pp[i].arr), (size_t)PyArray_NBYTES(pp[i].arr));
        if (st == RLX_OK)
            st = rlx_session_run(self->s);
        for (int i = 0; i < no && i < 64 && st == RLX_OK; i++)
            st = rlx_session_get_output(self->s, oi[i].name, bufs[i], oi[i].bytes);
    }
    t1 = now_s();
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS for (int i = 0; i < no && i < 64; i++) free(bufs[i]);
    release_prepared(pp, self->n_in);
    if (st != RLX_OK)
        return raise_status(st);
    return PyFloat_FromDouble(n > 0 ? (t1 - t0) / n : 0.0);
}

static PyMethodDef session_methods[] = {
    {"run", (PyCFunction)session_run, METH_VARARGS,
     "run(inputs, output_names=None, on_device=False) -> list of arrays (or device buffers)"},
    {"set_param", (PyCFunction)session_set_param, METH_VARARGS, "set_param(name, array)"},
    {"info", (PyCFunction)session_info, METH_VARARGS, "info(kind) -> [(name, shape, dtype)]; 0 in, 1 param, 2 out"},
    {"report", (PyCFunction)session_report, METH_NOARGS, "the dispatch report text"},
    {"to_dot", (PyCFunction)session_to_dot, METH_VARARGS, "the compiled graph as Graphviz text"},
    {"stats", (PyCFunction)session_stats, METH_NOARGS, "compile figures"},
    {"set_workload_params", (PyCFunction)session_set_workload_params, METH_VARARGS, "seeded workload weights"},
    {"_bench_c", (PyCFunction)session_bench_c, METH_VARARGS, "seconds per C-API call sequence"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rlx._rlx._Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_dealloc = (destructor)session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A compiled graph (internal; see rlx.CompiledGraph).",
    .tp_methods = session_methods,
};

/* ------------------------------------------------------------ _Model */

typedef struct {
    PyObject_HEAD rlx_model *m;
    pthread_mutex_t lock;
    int n_in;
    char **in_names;
    rlx_dtype *in_dtypes;
    int *in_ndims;
    int64_t (*in_dims)[RLX_MAX_DIMS];
    /* the last shapes run and their session: a run at the same shapes skips the cache lookup */
    rlx_session *last;
    int64_t (*last_dims)[RLX_MAX_DIMS];
    int *last_ndims;
    int *by_value; /* per input: bound by value at import (a constant; each value compiles once) */
    int any_by_value;
    rlx_device device;
    int device_index;
} ModelObject;

static void model_dealloc(ModelObject *self)
{
    rlx_model_free(self->m);
    for (int i = 0; i < self->n_in; i++)
        free(self->in_names[i]);
    free(self->in_names);
    free(self->in_dtypes);
    free(self->in_ndims);
    free(self->in_dims);
    free(self->last_dims);
    free(self->last_ndims);
    free(self->by_value);
    pthread_mutex_destroy(&self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _Model(source: str|bytes, inputs: [(name, dtype, dims-or-None, by_value)], device, precision, threads, base_dir) */
static int model_init(ModelObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source", "inputs", "device", "precision", "threads", "base_dir", NULL};
    PyObject *source, *inputs;
    const char *device = "cpu";
    int precision = 0, threads = 0;
    const char *base_dir = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|siiz", kwlist, &source, &inputs, &device, &precision, &threads,
                                     &base_dir))
        return -1;
    if (self->m) {
        PyErr_SetString(PyExc_RuntimeError, "_Model is already initialised");
        return -1;
    }
    pthread_mutex_init(&self->lock, NULL);
    rlx_options o;
    if (parse_options(&o, device, precision, threads, 0) != 0)
        return -1;
    self->device = o.device;
    self->device_index = o.device_index;
    if (!PyList_Check(inputs))
        return PyErr_SetString(PyExc_TypeError, "inputs must be a list"), -1;
    int n = (int)PyList_GET_SIZE(inputs);
    self->in_names = calloc((size_t)n + 1, sizeof *self->in_names);
    self->in_dtypes = calloc((size_t)n + 1, sizeof *self->in_dtypes);
    self->in_ndims = calloc((size_t)n + 1, sizeof *self->in_ndims);
    self->in_dims = calloc((size_t)n + 1, sizeof *self->in_dims);
    self->last_dims = calloc((size_t)n + 1, sizeof *self->last_dims);
    self->last_ndims = calloc((size_t)n + 1, sizeof *self->last_ndims);
    self->by_value = calloc((size_t)n + 1, sizeof *self->by_value);
    if (!self->by_value || !self->in_names || !self->in_dtypes || !self->in_ndims || !self->in_dims ||
        !self->last_dims || !self->last_ndims)
        return PyErr_NoMemory(), -1;
    for (int i = 0; i < n; i++) {
        const char *name;
        int dt;
        PyObject *dims;
        int by_value = 0;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(inputs, i), "siO|p", &name, &dt, &dims, &by_value))
            return -1;
        self->by_value[i] = by_value;
        self->any_by_value |= by_value;
        if (!(self->in_names[i] = strdup(name)))
            return PyErr_NoMemory(), -1;
        self->n_in++;
        self->in_dtypes[i] = (rlx_dtype)dt;
        if (dims == Py_None) {
            self->in_ndims[i] = -1;
        } else {
            Py_ssize_t nd = PySequence_Size(dims);
            if (nd < 0 || nd > RLX_MAX_DIMS)
                return PyErr_Format(PyExc_ValueError, "input '%s': bad rank", name), -1;
            self->in_ndims[i] = (int)nd;
            for (Py_ssize_t d = 0; d < nd; d++) {
                PyObject *v = PySequence_GetItem(dims, d);
                self->in_dims[i][d] = PyLong_Check(v) ? PyLong_AsLongLong(v) : -1;
                Py_XDECREF(v);
            }
        }
    }
    rlx_status st;
    rlx_model *m = NULL;
    if (PyBytes_Check(source)) {
        char *data;
        Py_ssize_t size;
        PyBytes_AsStringAndSize(source, &data, &size);
        Py_BEGIN_ALLOW_THREADS st = rlx_model_load_onnx_buffer(data, (size_t)size, base_dir, &o, &m);
        Py_END_ALLOW_THREADS
    } else {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(source, &b))
            return -1;
        const char *path = PyBytes_AS_STRING(b);
        Py_BEGIN_ALLOW_THREADS st = rlx_model_load_onnx(path, &o, &m);
        Py_END_ALLOW_THREADS Py_DECREF(b);
    }
    if (st != RLX_OK)
        return raise_status(st), -1;
    self->m = m;
    return 0;
}

/* The session for these input shapes (lock held, no GIL). */
static rlx_status model_session_for(ModelObject *self, const prepared *p, rlx_session **out)
{
    int same = self->last != NULL && !self->any_by_value;
    for (int i = 0; same && i < self->n_in; i++) {
        int nd = p_ndim(&p[i]);
        same = nd == self->last_ndims[i];
        for (int d = 0; same && d < nd; d++)
            same = p_dim(&p[i], d) == self->last_dims[i][d];
    }
    if (same) {
        *out = self->last;
        return RLX_OK;
    }
    rlx_onnx_binding b[64];
    int n = self->n_in < 64 ? self->n_in : 64;
    memset(b, 0, sizeof b);
    for (int i = 0; i < n; i++) {
        b[i].name = p[i].name;
        b[i].ndim = p_ndim(&p[i]);
        for (int d = 0; d < b[i].ndim && d < RLX_MAX_DIMS; d++)
            b[i].dims[d] = p_dim(&p[i], d);
        if (self->by_value[i] && p[i].arr) {
            b[i].value = PyArray_DATA(p[i].arr);
            b[i].bytes = (size_t)PyArray_NBYTES(p[i].arr);
        }
    }
    rlx_status st = rlx_model_session(self->m, b, n, out);
    if (st == RLX_OK) {
        self->last = *out;
        for (int i = 0; i < n; i++) {
            self->last_ndims[i] = b[i].ndim;
            memcpy(self->last_dims[i], b[i].dims, sizeof b[i].dims);
        }
    }
    return st;
}

/* The feeds as prepared inputs of this model (0), or an exception set (-1):
 * what run, run_staged and session_info share. */
static int model_prepare(ModelObject *self, PyObject *feeds, prepared *p)
{
    if (!self->m) {
        PyErr_Format(PyExc_RuntimeError, "model not loaded");
        return -1;
    }
    if (self->n_in > 64) {
        PyErr_Format(err_class[RLX_ERR_UNSUPPORTED], "models of more than 64 inputs are not supported here");
        return -1;
    }
    return prepare_inputs(self->device, self->device_index, feeds, self->n_in, (const char *const *)self->in_names,
                          self->in_dtypes, self->in_ndims, (const int64_t(*)[RLX_MAX_DIMS])self->in_dims, p);
}

static PyObject *model_run(ModelObject *self, PyObject *args)
{
    PyObject *feeds, *names = Py_None;
    int on_device = 0;
    if (!PyArg_ParseTuple(args, "O|Op", &feeds, &names, &on_device))
        return NULL;
    prepared p[64];
    if (model_prepare(self, feeds, p) != 0)
        return NULL;
    for (int i = 0; i < self->n_in; i++) {
        if (p_ndim(&p[i]) > RLX_MAX_DIMS) {
            release_prepared(p, self->n_in);
            return PyErr_Format(err_class[RLX_ERR_SHAPE], "input '%s' has rank %d; RLX takes up to %d dims", p[i].name,
                                p_ndim(&p[i]), RLX_MAX_DIMS);
        }
        if (self->by_value[i] && p[i].cap) {
            release_prepared(p, self->n_in);
            return PyErr_Format(err_class[RLX_ERR_UNSUPPORTED],
                                "input '%s' is bound by value (value_inputs): it must be host memory, not a CUDA "
                                "tensor",
                                p[i].name);
        }
    }
    rlx_status st;
    rlx_session *s = NULL;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    st = model_session_for(self, p, &s);
    if (st == RLX_OK)
        st = set_and_run(s, p, self->n_in);
    Py_END_ALLOW_THREADS PyObject *res =
        st == RLX_OK ? collect_outputs(s, names, on_device, self->device_index) : raise_status(st);
    pthread_mutex_unlock(&self->lock);
    release_prepared(p, self->n_in);
    return res;
}

static PyObject *tensor_array(rlx_dtype t, int nd, const int64_t *dims, void *data, size_t bytes);

/* run_staged(inputs) -> every output, in the model's order: rlx_model_run,
 * for models whose ops need values they compute at import (host arrays
 * only). */
static PyObject *model_run_staged(ModelObject *self, PyObject *args)
{
    PyObject *feeds;
    if (!PyArg_ParseTuple(args, "O", &feeds))
        return NULL;
    prepared p[64];
    if (model_prepare(self, feeds, p) != 0)
        return NULL;
    rlx_onnx_tensor xs[64];
    const char *xn[64];
    for (int i = 0; i < self->n_in; i++) {
        if (!p[i].arr || p_ndim(&p[i]) > RLX_MAX_DIMS) {
            release_prepared(p, self->n_in);
            return PyErr_Format(err_class[RLX_ERR_UNSUPPORTED],
                                "input '%s': a model run in stages takes host arrays of rank %d or less", p[i].name,
                                RLX_MAX_DIMS);
        }
        xn[i] = p[i].name;
        xs[i] = (rlx_onnx_tensor){.dtype = self->in_dtypes[i],
                                  .ndim = p_ndim(&p[i]),
                                  .data = PyArray_DATA(p[i].arr),
                                  .bytes = (size_t)PyArray_NBYTES(p[i].arr)};
        for (int d = 0; d < xs[i].ndim; d++)
            xs[i].dims[d] = p_dim(&p[i], d);
    }
    rlx_status st;
    rlx_onnx_tensor *ys = NULL;
    int ny = 0;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    st = rlx_model_run(self->m, self->n_in, xn, xs, &ys, &ny);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS release_prepared(p, self->n_in);
    if (st != RLX_OK)
        return raise_status(st);
    PyObject *list = PyList_New(ny);
    for (int i = 0; i < ny; i++) {
        PyObject *a = list ? tensor_array(ys[i].dtype, ys[i].ndim, ys[i].dims, ys[i].data, ys[i].bytes) : NULL;
        ys[i].data = NULL; /* taken (freed) by tensor_array */
        if (!a) {
            Py_CLEAR(list);
            continue;
        }
        PyList_SET_ITEM(list, i, a);
    }
    rlx_onnx_tensors_free(ys, ny);
    return list;
}

/* session_info(inputs) -> (inputs info, outputs info) of the session for
 * these inputs' shapes (compiling it if needed). */
static PyObject *model_compiled_info(ModelObject *self, PyObject *args)
{
    PyObject *feeds;
    if (!PyArg_ParseTuple(args, "O", &feeds))
        return NULL;
    prepared p[64];
    if (model_prepare(self, feeds, p) != 0)
        return NULL;
    rlx_status st;
    rlx_session *s = NULL;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    st = model_session_for(self, p, &s);
    Py_END_ALLOW_THREADS PyObject *res =
        st == RLX_OK ? Py_BuildValue("(NN)", info_list(s, 0), info_list(s, 2)) : raise_status(st);
    pthread_mutex_unlock(&self->lock);
    release_prepared(p, self->n_in);
    return res;
}

static PyObject *model_last_outputs(ModelObject *self, PyObject *noargs)
{
    (void)noargs;
    PyObject *res;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    Py_END_ALLOW_THREADS if (self->last) { res = info_list(self->last, 2); }
    else
    {
        Py_INCREF(Py_None);
        res = Py_None;
    }
    pthread_mutex_unlock(&self->lock);
    return res;
}

static PyObject *model_cached(ModelObject *self, PyObject *noargs)
{
    (void)noargs;
    int n;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    n = rlx_model_cached_sessions(self->m);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS return PyLong_FromLong(n);
}

static PyMethodDef model_methods[] = {
    {"run", (PyCFunction)model_run, METH_VARARGS,
     "run(inputs, output_names=None, on_device=False) -> list of arrays (or device buffers)"},
    {"compiled_info", (PyCFunction)model_compiled_info, METH_VARARGS,
     "(inputs, outputs) of the session for these inputs"},
    {"last_outputs", (PyCFunction)model_last_outputs, METH_NOARGS, "outputs of the last shapes run, or None"},
    {"cached_sessions", (PyCFunction)model_cached, METH_NOARGS, "number of compiled shapes"},
    {"run_staged", (PyCFunction)model_run_staged, METH_VARARGS,
     "run_staged(inputs) -> every output in model order, the model run in stages (rlx_model_run)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rlx._rlx._Model",
    .tp_basicsize = sizeof(ModelObject),
    .tp_dealloc = (destructor)model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An ONNX model compiled once per input shape (internal; see rlx.InferenceSession).",
    .tp_methods = model_methods,
    .tp_init = (initproc)model_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------ _Graph */

typedef struct {
    PyObject_HEAD rlx_graph *g;
} GraphObject;

static void graph_dealloc(GraphObject *self)
{
    rlx_graph_free(self->g);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int graph_init(GraphObject *self, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    if (!self->g && !(self->g = rlx_graph_new())) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int int64_list(PyObject *o, int64_t *out, int max, int *n, const char *what)
{
    PyObject *f = PySequence_Fast(o, what);
    if (!f)
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(f);
    if (len > max) {
        Py_DECREF(f);
        PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT], "%s: at most %d values", what, max);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(f, i));
        if (out[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            return -1;
        }
    }
    *n = (int)len;
    Py_DECREF(f);
    return 0;
}

static int int_list(PyObject *o, int *out, int max, int *n, const char *what)
{
    int64_t tmp[64];
    if (max > 64)
        max = 64;
    if (int64_list(o, tmp, max, n, what) != 0)
        return -1;
    for (int i = 0; i < *n; i++)
        out[i] = (int)tmp[i];
    return 0;
}

typedef rlx_node (*unary_fn)(rlx_graph *, rlx_node);
typedef rlx_node (*binary_fn)(rlx_graph *, rlx_node, rlx_node);
static const struct {
    const char *name;
    unary_fn fn;
} unary_ops[] = {{"neg", rlx_neg},
                 {"abs", rlx_abs},
                 {"exp", rlx_exp},
                 {"log", rlx_log},
                 {"sqrt", rlx_sqrt},
                 {"rsqrt", rlx_rsqrt},
                 {"reciprocal", rlx_reciprocal},
                 {"tanh", rlx_tanh},
                 {"sigmoid", rlx_sigmoid},
                 {"relu", rlx_relu},
                 {"gelu", rlx_gelu},
                 {"gelu_tanh", rlx_gelu_tanh},
                 {"silu", rlx_silu},
                 {"erf", rlx_erf},
                 {"sin", rlx_sin},
                 {"cos", rlx_cos},
                 {"floor", rlx_floor},
                 {"ceil", rlx_ceil},
                 {"round", rlx_round},
                 {"sign", rlx_sign},
                 {"logical_not", rlx_not},
                 {"global_avg_pool", rlx_global_avg_pool}};
static const struct {
    const char *name;
    binary_fn fn;
} binary_ops[] = {{"add", rlx_add},        {"sub", rlx_sub},         {"mul", rlx_mul},         {"div", rlx_div},
                  {"pow", rlx_pow},        {"maximum", rlx_max},     {"minimum", rlx_min},     {"equal", rlx_equal},
                  {"less", rlx_less},      {"greater", rlx_greater}, {"logical_and", rlx_and}, {"logical_or", rlx_or},
                  {"logical_xor", rlx_xor}};

static PyObject *ops_names(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    size_t nu = sizeof unary_ops / sizeof unary_ops[0], nb = sizeof binary_ops / sizeof binary_ops[0];
    PyObject *u = PyTuple_New((Py_ssize_t)nu), *b = PyTuple_New((Py_ssize_t)nb);
    for (size_t i = 0; u && i < nu; i++)
        PyTuple_SET_ITEM(u, (Py_ssize_t)i, PyUnicode_FromString(unary_ops[i].name));
    for (size_t i = 0; b && i < nb; i++)
        PyTuple_SET_ITEM(b, (Py_ssize_t)i, PyUnicode_FromString(binary_ops[i].name));
    return Py_BuildValue("(NN)", u, b);
}

/* The status of a failed builder: the graph keeps its first error, which
 * verify reports; the message is already in rlx_last_error. */
static PyObject *builder_failed(GraphObject *self)
{
    rlx_status st = rlx_graph_verify(self->g);
    const char *msg = rlx_last_error();
    PyErr_Format(err_class[st != RLX_OK ? st : RLX_ERR_INVALID_ARGUMENT], "%s", msg);
    return NULL;
}

#define NODE(expr)                       \
    do {                                 \
        rlx_node n_ = (expr);            \
        if (n_ < 0)                      \
            return builder_failed(self); \
        return PyLong_FromLong(n_);      \
    } while (0)

/* Builders fail on a negative operand; the graph keeps that first error. */
static PyObject *g_unary(GraphObject *self, PyObject *args)
{
    const char *op;
    int x;
    if (!PyArg_ParseTuple(args, "si", &op, &x))
        return NULL;
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
        if (!strcmp(op, unary_ops[i].name))
            NODE(unary_ops[i].fn(self->g, x));
    return PyErr_Format(err_class[RLX_ERR_NOT_FOUND], "no unary op '%s'", op);
}

static PyObject *g_binary(GraphObject *self, PyObject *args)
{
    const char *op;
    int a, b;
    if (!PyArg_ParseTuple(args, "sii", &op, &a, &b))
        return NULL;
    for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
        if (!strcmp(op, binary_ops[i].name))
            NODE(binary_ops[i].fn(self->g, a, b));
    return PyErr_Format(err_class[RLX_ERR_NOT_FOUND], "no binary op '%s'", op);
}

static PyObject *g_leaf(GraphObject *self, PyObject *args)
{
    int param, dt;
    const char *name;
    PyObject *dims;
    if (!PyArg_ParseTuple(args, "psiO", &param, &name, &dt, &dims))
        return NULL;
    int64_t d[RLX_MAX_DIMS];
    int nd;
    if (int64_list(dims, d, RLX_MAX_DIMS, &nd, "shape") != 0)
        return NULL;
    NODE(param ? rlx_param(self->g, name, (rlx_dtype)dt, nd, d) : rlx_input(self->g, name, (rlx_dtype)dt, nd, d));
}

static PyObject *g_constant(GraphObject *self, PyObject *args)
{
    PyObject *v;
    int dt;
    if (!PyArg_ParseTuple(args, "Oi", &v, &dt))
        return NULL;
    PyArrayObject *a = as_input(v, "constant", (rlx_dtype)dt);
    if (!a)
        return NULL;
    if (PyArray_NDIM(a) > RLX_MAX_DIMS) {
        Py_DECREF(a);
        return PyErr_Format(err_class[RLX_ERR_SHAPE], "constant: rank above %d", RLX_MAX_DIMS);
    }
    int64_t d[RLX_MAX_DIMS];
    for (int i = 0; i < PyArray_NDIM(a); i++)
        d[i] = PyArray_DIM(a, i);
    rlx_node n = rlx_constant(self->g, (rlx_dtype)dt, PyArray_NDIM(a), d, PyArray_DATA(a), (size_t)PyArray_NBYTES(a));
    Py_DECREF(a);
    NODE(n);
}

static PyObject *g_scalar(GraphObject *self, PyObject *args)
{
    int dt;
    double v;
    if (!PyArg_ParseTuple(args, "id", &dt, &v))
        return NULL;
    NODE(rlx_scalar(self->g, (rlx_dtype)dt, v));
}

static PyObject *g_output(GraphObject *self, PyObject *args)
{
    const char *name;
    int x;
    if (!PyArg_ParseTuple(args, "si", &name, &x))
        return NULL;
    rlx_status st = rlx_output(self->g, name, x);
    if (st != RLX_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *g_node_info(GraphObject *self, PyObject *args)
{
    int x;
    if (!PyArg_ParseTuple(args, "i", &x))
        return NULL;
    int nd;
    int64_t d[RLX_MAX_DIMS];
    rlx_status st = rlx_node_shape(self->g, x, &nd, d);
    if (st != RLX_OK)
        return raise_status(st);
    PyObject *shape = PyTuple_New(nd);
    for (int i = 0; shape && i < nd; i++)
        PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(d[i]));
    return shape ? Py_BuildValue("(Ni)", shape, (int)rlx_node_dtype(self->g, x)) : NULL;
}

static PyObject *g_set_name(GraphObject *self, PyObject *args)
{
    int x;
    const char *name;
    if (!PyArg_ParseTuple(args, "is", &x, &name))
        return NULL;
    rlx_status st = rlx_node_set_name(self->g, x, name);
    if (st != RLX_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *g_mod(GraphObject *self, PyObject *args)
{
    int a, b, f;
    if (!PyArg_ParseTuple(args, "iip", &a, &b, &f))
        return NULL;
    NODE(rlx_mod(self->g, a, b, f));
}

static PyObject *g_where(GraphObject *self, PyObject *args)
{
    int c, a, b;
    if (!PyArg_ParseTuple(args, "iii", &c, &a, &b))
        return NULL;
    NODE(rlx_where(self->g, c, a, b));
}

static PyObject *g_cast(GraphObject *self, PyObject *args)
{
    int x, t;
    if (!PyArg_ParseTuple(args, "ii", &x, &t))
        return NULL;
    NODE(rlx_cast(self->g, x, (rlx_dtype)t));
}

static PyObject *g_clip(GraphObject *self, PyObject *args)
{
    int x;
    double lo, hi;
    if (!PyArg_ParseTuple(args, "idd", &x, &lo, &hi))
        return NULL;
    NODE(rlx_clip(self->g, x, lo, hi));
}

static PyObject *g_matmul(GraphObject *self, PyObject *args)
{
    int a, b, ta = 0, tb = 0;
    if (!PyArg_ParseTuple(args, "ii|pp", &a, &b, &ta, &tb))
        return NULL;
    NODE(rlx_matmul(self->g, a, b, ta, tb));
}

static PyObject *g_reduce(GraphObject *self, PyObject *args)
{
    const char *op;
    int x, keep, axes[RLX_MAX_DIMS], na = 0;
    PyObject *ax;
    if (!PyArg_ParseTuple(args, "siOp", &op, &x, &ax, &keep))
        return NULL;
    if (ax != Py_None && int_list(ax, axes, RLX_MAX_DIMS, &na, "axes") != 0)
        return NULL;
    rlx_node (*fn)(rlx_graph *, rlx_node, int, const int *, int) = !strcmp(op, "sum")    ? rlx_reduce_sum
                                                                   : !strcmp(op, "mean") ? rlx_reduce_mean
                                                                   : !strcmp(op, "max")  ? rlx_reduce_max
                                                                   : !strcmp(op, "min")  ? rlx_reduce_min
                                                                   : !strcmp(op, "prod") ? rlx_reduce_prod
                                                                                         : NULL;
    if (!fn)
        return PyErr_Format(err_class[RLX_ERR_NOT_FOUND], "no reduction '%s'", op);
    NODE(fn(self->g, x, na, axes, keep));
}

static PyObject *g_arg(GraphObject *self, PyObject *args)
{
    int x, axis, keep, ismax;
    if (!PyArg_ParseTuple(args, "piip", &ismax, &x, &axis, &keep))
        return NULL;
    NODE(ismax ? rlx_argmax(self->g, x, axis, keep) : rlx_argmin(self->g, x, axis, keep));
}

static PyObject *g_softmax(GraphObject *self, PyObject *args)
{
    int x, axis, logf;
    if (!PyArg_ParseTuple(args, "iip", &x, &axis, &logf))
        return NULL;
    NODE(logf ? rlx_log_softmax(self->g, x, axis) : rlx_softmax(self->g, x, axis));
}

static PyObject *g_norm(GraphObject *self, PyObject *args)
{
    int rms, x, gamma, beta;
    double eps;
    if (!PyArg_ParseTuple(args, "piiid", &rms, &x, &gamma, &beta, &eps))
        return NULL;
    NODE(rms ? rlx_rms_norm(self->g, x, gamma, eps) : rlx_layer_norm(self->g, x, gamma, beta, eps));
}

static PyObject *g_batch_norm(GraphObject *self, PyObject *args)
{
    int x, s, b, m, v;
    double eps;
    if (!PyArg_ParseTuple(args, "iiiiid", &x, &s, &b, &m, &v, &eps))
        return NULL;
    NODE(rlx_batch_norm(self->g, x, s, b, m, v, eps));
}

static PyObject *g_reshape(GraphObject *self, PyObject *args)
{
    int x, nd;
    PyObject *dims;
    int64_t d[RLX_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "iO", &x, &dims) || int64_list(dims, d, RLX_MAX_DIMS, &nd, "shape") != 0)
        return NULL;
    NODE(rlx_reshape(self->g, x, nd, d));
}

static PyObject *g_expand(GraphObject *self, PyObject *args)
{
    int x, nd;
    PyObject *dims;
    int64_t d[RLX_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "iO", &x, &dims) || int64_list(dims, d, RLX_MAX_DIMS, &nd, "shape") != 0)
        return NULL;
    NODE(rlx_expand(self->g, x, nd, d));
}

static PyObject *g_transpose(GraphObject *self, PyObject *args)
{
    int x, np, perm[RLX_MAX_DIMS], nd;
    int64_t d[RLX_MAX_DIMS];
    PyObject *p;
    if (!PyArg_ParseTuple(args, "iO", &x, &p) || int_list(p, perm, RLX_MAX_DIMS, &np, "perm") != 0)
        return NULL;
    rlx_status st = rlx_node_shape(self->g, x, &nd, d);
    if (st != RLX_OK)
        return raise_status(st);
    if (np != nd)
        return PyErr_Format(err_class[RLX_ERR_SHAPE], "transpose: perm has %d entries, the operand rank %d", np, nd);
    NODE(rlx_transpose(self->g, x, perm));
}

static PyObject *g_slice(GraphObject *self, PyObject *args)
{
    int x, axes[RLX_MAX_DIMS], na, ns, ne, nst;
    int64_t starts[RLX_MAX_DIMS], ends[RLX_MAX_DIMS], steps[RLX_MAX_DIMS];
    PyObject *a, *s, *e, *st;
    if (!PyArg_ParseTuple(args, "iOOOO", &x, &a, &s, &e, &st) || int_list(a, axes, RLX_MAX_DIMS, &na, "axes") ||
        int64_list(s, starts, RLX_MAX_DIMS, &ns, "starts") || int64_list(e, ends, RLX_MAX_DIMS, &ne, "ends") ||
        int64_list(st, steps, RLX_MAX_DIMS, &nst, "steps"))
        return NULL;
    if (ns != na || ne != na || nst != na)
        return PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT], "slice: axes, starts, ends, steps differ in length");
    NODE(rlx_slice(self->g, x, na, axes, starts, ends, steps));
}

static PyObject *g_concat(GraphObject *self, PyObject *args)
{
    PyObject *xs;
    int axis, n;
    int64_t ids[256];
    rlx_node nodes[256];
    if (!PyArg_ParseTuple(args, "Oi", &xs, &axis) || int64_list(xs, ids, 256, &n, "nodes") != 0)
        return NULL;
    for (int i = 0; i < n; i++)
        nodes[i] = (rlx_node)ids[i];
    NODE(rlx_concat(self->g, n, nodes, axis));
}

static PyObject *g_split(GraphObject *self, PyObject *args)
{
    int x, axis, n;
    PyObject *sz;
    int64_t sizes[256];
    rlx_node outs[256];
    if (!PyArg_ParseTuple(args, "iiO", &x, &axis, &sz) || int64_list(sz, sizes, 256, &n, "sizes") != 0)
        return NULL;
    rlx_status st = rlx_split(self->g, x, axis, n, sizes, outs);
    if (st != RLX_OK)
        return raise_status(st);
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromLong(outs[i]));
    return t;
}

static PyObject *g_gather(GraphObject *self, PyObject *args)
{
    int d, i, axis;
    if (!PyArg_ParseTuple(args, "iii", &d, &i, &axis))
        return NULL;
    NODE(rlx_gather(self->g, d, i, axis));
}

static PyObject *g_pad(GraphObject *self, PyObject *args)
{
    int x, mode, np;
    PyObject *p;
    double value;
    int64_t pads[2 * RLX_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "iOid", &x, &p, &mode, &value) || int64_list(p, pads, 2 * RLX_MAX_DIMS, &np, "pads"))
        return NULL;
    int nd;
    int64_t d[RLX_MAX_DIMS];
    rlx_status st = rlx_node_shape(self->g, x, &nd, d);
    if (st != RLX_OK)
        return raise_status(st);
    if (np != 2 * nd)
        return PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT], "pad: pads needs %d values (begins then ends), got %d",
                            2 * nd, np);
    NODE(rlx_pad(self->g, x, pads, (rlx_pad_mode)mode, value));
}

static PyObject *g_rope(GraphObject *self, PyObject *args)
{
    int x, inter;
    double theta;
    long long off;
    if (!PyArg_ParseTuple(args, "idLp", &x, &theta, &off, &inter))
        return NULL;
    NODE(rlx_rope(self->g, x, theta, off, inter));
}

static PyObject *g_attention(GraphObject *self, PyObject *args)
{
    int q, k, v, mask, causal;
    double scale;
    if (!PyArg_ParseTuple(args, "iiiipd", &q, &k, &v, &mask, &causal, &scale))
        return NULL;
    NODE(rlx_attention(self->g, q, k, v, mask, causal, scale));
}

static PyObject *g_conv(GraphObject *self, PyObject *args)
{
    int x, w, b, n1, n2, n3;
    PyObject *st, *dl, *pd;
    long long groups;
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    if (!PyArg_ParseTuple(args, "iiiOOOL", &x, &w, &b, &st, &dl, &pd, &groups) ||
        int64_list(st, p.stride, 2, &n1, "stride") || int64_list(dl, p.dilation, 2, &n2, "dilation") ||
        int64_list(pd, p.pads, 4, &n3, "pads"))
        return NULL;
    p.groups = groups;
    NODE(rlx_conv(self->g, x, w, b, &p));
}

static PyObject *g_pool(GraphObject *self, PyObject *args)
{
    int ismax, x, n1, n2, n3, n4, cip, ceil;
    PyObject *k, *st, *dl, *pd;
    rlx_pool_params p;
    rlx_pool_params_init(&p, 1);
    if (!PyArg_ParseTuple(args, "piOOOOpp", &ismax, &x, &k, &st, &dl, &pd, &cip, &ceil) ||
        int64_list(k, p.kernel, 2, &n1, "kernel") || int64_list(st, p.stride, 2, &n2, "stride") ||
        int64_list(dl, p.dilation, 2, &n3, "dilation") || int64_list(pd, p.pads, 4, &n4, "pads"))
        return NULL;
    p.count_include_pad = cip;
    p.ceil_mode = ceil;
    NODE(ismax ? rlx_max_pool(self->g, x, &p) : rlx_avg_pool(self->g, x, &p));
}

static PyObject *g_random(GraphObject *self, PyObject *args)
{
    int normal, dt, nd;
    PyObject *dims;
    double a, b;
    int64_t d[RLX_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "piOdd", &normal, &dt, &dims, &a, &b) ||
        int64_list(dims, d, RLX_MAX_DIMS, &nd, "shape"))
        return NULL;
    NODE(normal ? rlx_random_normal(self->g, (rlx_dtype)dt, nd, d, a, b)
                : rlx_random_uniform(self->g, (rlx_dtype)dt, nd, d, a, b));
}

static PyObject *g_dropout(GraphObject *self, PyObject *args)
{
    int x;
    double p;
    if (!PyArg_ParseTuple(args, "id", &x, &p))
        return NULL;
    NODE(rlx_dropout(self->g, x, p));
}

static PyObject *g_gradients(GraphObject *self, PyObject *args)
{
    int loss;
    PyObject *wrt;
    if (!PyArg_ParseTuple(args, "iO", &loss, &wrt))
        return NULL;
    PyObject *f = PySequence_Fast(wrt, "wrt must be a list of node ids");
    if (!f)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(f);
    rlx_node *w = calloc((size_t)n + 1, sizeof *w), *gr = calloc((size_t)n + 1, sizeof *gr);
    PyObject *res = NULL;
    if (!w || !gr) {
        res = PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(f, i));
        if (v == -1 && PyErr_Occurred())
            goto out;
        w[i] = (rlx_node)v;
    }
    rlx_status st = rlx_gradients(self->g, loss, (int)n, w, gr);
    if (st != RLX_OK) {
        res = raise_status(st);
        goto out;
    }
    res = PyList_New(n);
    for (Py_ssize_t i = 0; res && i < n; i++)
        PyList_SET_ITEM(res, i, PyLong_FromLong(gr[i]));
out:
    free(w), free(gr);
    Py_DECREF(f);
    return res;
}

static PyObject *g_cross_entropy(GraphObject *self, PyObject *args)
{
    int logits, labels;
    long long ignore = -100;
    double smoothing = 0;
    if (!PyArg_ParseTuple(args, "ii|Ld", &logits, &labels, &ignore, &smoothing))
        return NULL;
    NODE(rlx_cross_entropy(self->g, logits, labels, (int64_t)ignore, smoothing));
}

static PyObject *g_mse_loss(GraphObject *self, PyObject *args)
{
    int pred, target;
    if (!PyArg_ParseTuple(args, "ii", &pred, &target))
        return NULL;
    NODE(rlx_mse_loss(self->g, pred, target));
}

static PyObject *g_node_count(GraphObject *self, PyObject *noargs)
{
    (void)noargs;
    return PyLong_FromLong(rlx_graph_node_count(self->g));
}

static PyObject *g_verify(GraphObject *self, PyObject *noargs)
{
    (void)noargs;
    rlx_status st = rlx_graph_verify(self->g);
    if (st != RLX_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *g_to_dot(GraphObject *self, PyObject *args)
{
    const char *title = NULL;
    if (!PyArg_ParseTuple(args, "|z", &title))
        return NULL;
    char *text = NULL;
    rlx_status st = rlx_graph_to_dot(self->g, title, &text);
    return dot_result(st, text);
}

static PyObject *g_compile(GraphObject *self, PyObject *args)
{
    const char *device = "cpu";
    int precision = 0, threads = 0, report = 0;
    unsigned long long seed = 0;
    if (!PyArg_ParseTuple(args, "|siipK", &device, &precision, &threads, &report, &seed))
        return NULL;
    rlx_options o;
    if (parse_options(&o, device, precision, threads, report) != 0)
        return NULL;
    if (seed)
        o.seed = seed;
    rlx_session *s = NULL;
    rlx_status st;
    Py_BEGIN_ALLOW_THREADS st = rlx_compile(self->g, &o, &s);
    Py_END_ALLOW_THREADS if (st != RLX_OK) return raise_status(st);
    return session_wrap(s, o.device, o.device_index);
}

static PyObject *g_from_workload(PyTypeObject *type, PyObject *args)
{
    const char *name;
    int batch = 0, seq = 0;
    if (!PyArg_ParseTuple(args, "s|ii", &name, &batch, &seq))
        return NULL;
    rlx_graph *g = NULL;
    rlx_status st;
    Py_BEGIN_ALLOW_THREADS st = rlx_workload_graph(name, batch, seq, &g);
    Py_END_ALLOW_THREADS if (st != RLX_OK) return raise_status(st);
    GraphObject *o = (GraphObject *)type->tp_alloc(type, 0);
    if (!o) {
        rlx_graph_free(g);
        return NULL;
    }
    o->g = g;
    return (PyObject *)o;
}

static PyMethodDef graph_methods[] = {{"unary", (PyCFunction)g_unary, METH_VARARGS, NULL},
                                      {"binary", (PyCFunction)g_binary, METH_VARARGS, NULL},
                                      {"leaf", (PyCFunction)g_leaf, METH_VARARGS, NULL},
                                      {"constant", (PyCFunction)g_constant, METH_VARARGS, NULL},
                                      {"scalar", (PyCFunction)g_scalar, METH_VARARGS, NULL},
                                      {"output", (PyCFunction)g_output, METH_VARARGS, NULL},
                                      {"node_info", (PyCFunction)g_node_info, METH_VARARGS, NULL},
                                      {"set_name", (PyCFunction)g_set_name, METH_VARARGS, NULL},
                                      {"mod", (PyCFunction)g_mod, METH_VARARGS, NULL},
                                      {"where", (PyCFunction)g_where, METH_VARARGS, NULL},
                                      {"cast", (PyCFunction)g_cast, METH_VARARGS, NULL},
                                      {"clip", (PyCFunction)g_clip, METH_VARARGS, NULL},
                                      {"matmul", (PyCFunction)g_matmul, METH_VARARGS, NULL},
                                      {"reduce", (PyCFunction)g_reduce, METH_VARARGS, NULL},
                                      {"arg", (PyCFunction)g_arg, METH_VARARGS, NULL},
                                      {"softmax", (PyCFunction)g_softmax, METH_VARARGS, NULL},
                                      {"norm", (PyCFunction)g_norm, METH_VARARGS, NULL},
                                      {"batch_norm", (PyCFunction)g_batch_norm, METH_VARARGS, NULL},
                                      {"reshape", (PyCFunction)g_reshape, METH_VARARGS, NULL},
                                      {"expand", (PyCFunction)g_expand, METH_VARARGS, NULL},
                                      {"transpose", (PyCFunction)g_transpose, METH_VARARGS, NULL},
                                      {"slice", (PyCFunction)g_slice, METH_VARARGS, NULL},
                                      {"concat", (PyCFunction)g_concat, METH_VARARGS, NULL},
                                      {"split", (PyCFunction)g_split, METH_VARARGS, NULL},
                                      {"gather", (PyCFunction)g_gather, METH_VARARGS, NULL},
                                      {"pad", (PyCFunction)g_pad, METH_VARARGS, NULL},
                                      {"rope", (PyCFunction)g_rope, METH_VARARGS, NULL},
                                      {"attention", (PyCFunction)g_attention, METH_VARARGS, NULL},
                                      {"conv", (PyCFunction)g_conv, METH_VARARGS, NULL},
                                      {"pool", (PyCFunction)g_pool, METH_VARARGS, NULL},
                                      {"random", (PyCFunction)g_random, METH_VARARGS, NULL},
                                      {"dropout", (PyCFunction)g_dropout, METH_VARARGS, NULL},
                                      {"gradients", (PyCFunction)g_gradients, METH_VARARGS, NULL},
                                      {"cross_entropy", (PyCFunction)g_cross_entropy, METH_VARARGS, NULL},
                                      {"mse_loss", (PyCFunction)g_mse_loss, METH_VARARGS, NULL},
                                      {"node_count", (PyCFunction)g_node_count, METH_NOARGS, NULL},
                                      {"verify", (PyCFunction)g_verify, METH_NOARGS, NULL},
                                      {"to_dot", (PyCFunction)g_to_dot, METH_VARARGS, NULL},
                                      {"compile", (PyCFunction)g_compile, METH_VARARGS, NULL},
                                      {"from_workload", (PyCFunction)g_from_workload, METH_VARARGS | METH_CLASS, NULL},
                                      {NULL, NULL, 0, NULL}};

static PyTypeObject GraphType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rlx._rlx._Graph",
    .tp_basicsize = sizeof(GraphObject),
    .tp_dealloc = (destructor)graph_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A graph under construction (internal; see rlx.Graph).",
    .tp_methods = graph_methods,
    .tp_init = (initproc)graph_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------ _LLM
 * A decoder LLM (rlx_llm) and one generation context for it.  The context
 * serves one generation at a time: `busy`, under `mu`, is a flag rather
 * than a held mutex because a stream takes it on one thread and may give
 * it back on another.  Waiting for it happens without the GIL. */

static PyObject *raise_msg(rlx_status st, const char *msg)
{
    PyObject *cls = (st > 0 && st <= RLX_ERR_INTERNAL && err_class[st]) ? err_class[st] : err_base;
    PyErr_Format(cls, "%s", msg && *msg ? msg : rlx_status_name(st));
    return NULL;
}

typedef struct {
    PyObject_HEAD rlx_llm *m;
    rlx_llm_context *c;
    rlx_llm_info info;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int init; /* mu and cv initialised */
    int busy;
    int stream_busy;             /* busy with an unfinished stream ... */
    unsigned long stream_thread; /* ... driven last from this thread */
    rlx_generate_stats last;
    int has_last;
} LLMObject;

static PyTypeObject LLMType;

static void llm_dealloc(LLMObject *self)
{
    Py_BEGIN_ALLOW_THREADS rlx_llm_context_free(self->c);
    rlx_llm_free(self->m);
    Py_END_ALLOW_THREADS if (self->init)
    {
        pthread_mutex_destroy(&self->mu);
        pthread_cond_destroy(&self->cv);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* _LLM(path or None, device, precision, ctx, threads, prefill_chunk) */
static int llm_init(LLMObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "device", "precision", "ctx", "threads", "prefill_chunk", NULL};
    PyObject *path = Py_None;
    const char *device = "cpu";
    int precision = 0, ctx = 0, threads = 0, chunk = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Osiiii", kwlist, &path, &device, &precision, &ctx, &threads, &chunk))
        return -1;
    if (self->m) {
        PyErr_SetString(PyExc_RuntimeError, "_LLM is already initialised");
        return -1;
    }
    if (precision < 0 || precision > 2 || ctx < 0 || threads < 0 || chunk < 0) {
        PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT], "bad precision %d, ctx %d, threads %d or prefill chunk %d",
                     precision, ctx, threads, chunk);
        return -1;
    }
    rlx_device kind;
    int index;
    if (parse_device(device, &kind, &index) != 0)
        return -1;
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv, NULL);
    self->init = 1;
    PyObject *b = NULL;
    if (path != Py_None && !PyUnicode_FSConverter(path, &b))
        return -1;
    const char *p = b ? PyBytes_AS_STRING(b) : NULL;
    rlx_llm_options o;
    rlx_llm_options_init(&o);
    o.device = kind;
    o.device_index = index;
    o.precision = (rlx_precision)precision;
    o.threads = threads;
    o.ctx = ctx;
    o.prefill_chunk = chunk;
    rlx_llm *m = NULL;
    rlx_llm_context *c = NULL;
    rlx_status st;
    char msg[1024] = "";
    Py_BEGIN_ALLOW_THREADS st = rlx_llm_load(p, &m);
    if (st == RLX_OK)
        st = rlx_llm_context_new(m, &o, &c);
    if (st != RLX_OK) {
        snprintf(msg, sizeof msg, "%s", rlx_last_error());
        rlx_llm_free(m);
        m = NULL;
    }
    Py_END_ALLOW_THREADS Py_XDECREF(b);
    if (st != RLX_OK)
        return raise_msg(st, msg), -1;
    self->m = m;
    self->c = c;
    rlx_llm_get_info(m, &self->info);
    return 0;
}

static int llm_ready(LLMObject *self)
{
    if (!self->m || !self->c) {
        PyErr_SetString(PyExc_RuntimeError, "the LLM is not loaded");
        return 0;
    }
    return 1;
}

/* Takes the context for one generation (waiting without the GIL); refuses
 * when an unfinished stream driven from this very thread holds it, which
 * no wait would end. */
static int llm_acquire(LLMObject *self, int for_stream)
{
    unsigned long me = PyThread_get_thread_ident();
    int refused = 0;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->mu);
    while (self->busy && !(refused = self->stream_busy && self->stream_thread == me))
        pthread_cond_wait(&self->cv, &self->mu);
    if (!refused) {
        self->busy = 1;
        self->stream_busy = for_stream;
        self->stream_thread = me;
    }
    pthread_mutex_unlock(&self->mu);
    Py_END_ALLOW_THREADS if (refused)
    {
        PyErr_SetString(err_class[RLX_ERR_RUNTIME],
                        "this LLM is streaming an unfinished generation on this thread: exhaust or close() that "
                        "iterator first (or use another rlx.LLM)");
        return -1;
    }
    return 0;
}

static void llm_release(LLMObject *self)
{
    pthread_mutex_lock(&self->mu);
    self->busy = 0;
    self->stream_busy = 0;
    pthread_cond_broadcast(&self->cv);
    pthread_mutex_unlock(&self->mu);
}

static PyObject *llm_info(LLMObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!llm_ready(self))
        return NULL;
    const rlx_llm_info *i = &self->info;
    return Py_BuildValue("{s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "architecture", i->arch, "layers",
                         i->layers, "hidden", i->hidden, "heads", i->heads, "kv_heads", i->kv_heads, "head_dim",
                         i->head_dim, "ffn", i->ffn, "vocab_size", i->vocab, "context_length", i->max_ctx, "bos",
                         i->bos, "eos", i->eos, "ctx", rlx_llm_context_size(self->c));
}

/* tokenize(text: str|bytes, add_special: bool) -> [ids] */
static PyObject *llm_tokenize(LLMObject *self, PyObject *args)
{
    const char *text;
    Py_ssize_t len;
    int add_special = 1;
    if (!PyArg_ParseTuple(args, "s#|p", &text, &len, &add_special) || !llm_ready(self))
        return NULL;
    int32_t small[256], *ids = small;
    int n;
    Py_BEGIN_ALLOW_THREADS n = rlx_llm_tokenize(self->m, text, (size_t)len, add_special, ids, 256);
    if (n > 256) {
        ids = malloc((size_t)n * sizeof *ids);
        n = ids ? rlx_llm_tokenize(self->m, text, (size_t)len, add_special, ids, n) : -2;
    }
    Py_END_ALLOW_THREADS if (n == -2) return PyErr_NoMemory();
    if (n < 0) {
        if (ids != small)
            free(ids);
        return raise_status(RLX_ERR_INVALID_ARGUMENT);
    }
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++)
        PyList_SET_ITEM(l, i, PyLong_FromLong(ids[i]));
    if (ids != small)
        free(ids);
    return l;
}

/* A sequence of ints as int32 ids (malloc'd); *n its length. */
static int32_t *ids_of(PyObject *seq, int *n)
{
    PyObject *f = PySequence_Fast(seq, "token ids must be a sequence of int");
    if (!f)
        return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(f);
    int32_t *ids = malloc(((size_t)len + 1) * sizeof *ids);
    if (!ids) {
        Py_DECREF(f);
        return (int32_t *)PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(f, i);
        long v = PyLong_Check(o) || PyIndex_Check(o) ? PyLong_AsLong(o) : -1;
        if (!PyLong_Check(o) && !PyIndex_Check(o))
            PyErr_Format(PyExc_TypeError, "token ids must be int, got %s", Py_TYPE(o)->tp_name);
        else if (!PyErr_Occurred() && (v < INT32_MIN || v > INT32_MAX))
            PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT], "token id %ld is out of range", v);
        if (PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT], "token id %zd is out of range", i);
            }
            free(ids);
            Py_DECREF(f);
            return NULL;
        }
        ids[i] = (int32_t)v;
    }
    Py_DECREF(f);
    *n = (int)len;
    return ids;
}

/* detokenize(ids) -> bytes */
static PyObject *llm_detokenize(LLMObject *self, PyObject *seq)
{
    if (!llm_ready(self))
        return NULL;
    int n = 0;
    int32_t *ids = ids_of(seq, &n);
    if (!ids)
        return NULL;
    char small[1024], *buf = small;
    long len;
    Py_BEGIN_ALLOW_THREADS len = rlx_llm_detokenize(self->m, ids, n, buf, sizeof small);
    if (len > (long)sizeof small) {
        buf = malloc((size_t)len);
        len = buf ? rlx_llm_detokenize(self->m, ids, n, buf, (size_t)len) : -2;
    }
    Py_END_ALLOW_THREADS free(ids);
    PyObject *r = len == -2 ? PyErr_NoMemory()
                  : len < 0 ? raise_status(RLX_ERR_INVALID_ARGUMENT)
                            : PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
    if (buf != small)
        free(buf);
    return r;
}

/* token_piece(id) -> bytes */
static PyObject *llm_token_piece(LLMObject *self, PyObject *args)
{
    long id;
    if (!PyArg_ParseTuple(args, "l", &id) || !llm_ready(self))
        return NULL;
    if (id < 0 || id >= self->info.vocab)
        return PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT], "token %ld is outside the vocabulary of %d", id,
                            self->info.vocab);
    char small[256], *buf = small;
    int len = rlx_llm_token_piece(self->m, (int32_t)id, buf, sizeof small);
    if (len > (int)sizeof small) {
        if (!(buf = malloc((size_t)len)))
            return PyErr_NoMemory();
        len = rlx_llm_token_piece(self->m, (int32_t)id, buf, (size_t)len);
    }
    PyObject *r = len < 0 ? raise_status(RLX_ERR_INVALID_ARGUMENT) : PyBytes_FromStringAndSize(buf, len);
    if (buf != small)
        free(buf);
    return r;
}

static PyObject *llm_is_eog(LLMObject *self, PyObject *args)
{
    long id;
    if (!PyArg_ParseTuple(args, "l", &id) || !llm_ready(self))
        return NULL;
    return PyBool_FromLong(id >= INT32_MIN && id <= INT32_MAX && rlx_llm_is_eog(self->m, (int32_t)id));
}

/* logits(ids) -> float32 [vocab]: the prompt prefilled into sequence 0,
 * the distribution after its last token. */
static PyObject *llm_logits(LLMObject *self, PyObject *seq)
{
    if (!llm_ready(self))
        return NULL;
    int n = 0;
    int32_t *ids = ids_of(seq, &n);
    if (!ids)
        return NULL;
    if (llm_acquire(self, 0) != 0) {
        free(ids);
        return NULL;
    }
    npy_intp dims[1] = {self->info.vocab};
    PyObject *arr = PyArray_SimpleNew(1, dims, NPY_FLOAT32);
    rlx_status st = RLX_OK;
    char msg[1024] = "";
    if (arr) {
        float *out = PyArray_DATA((PyArrayObject *)arr);
        const int32_t *const rows[1] = {ids};
        Py_BEGIN_ALLOW_THREADS st = rlx_llm_prefill(self->c, 1, rows, &n);
        if (st == RLX_OK)
            memcpy(out, rlx_llm_logits(self->c, 0), (size_t)self->info.vocab * sizeof(float));
        else
            snprintf(msg, sizeof msg, "%s", rlx_last_error());
        Py_END_ALLOW_THREADS
    }
    llm_release(self);
    free(ids);
    if (arr && st != RLX_OK) {
        Py_DECREF(arr);
        return raise_msg(st, msg);
    }
    return arr;
}

/* The generation settings, parsed once for both generate and stream:
 * (ids, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
 * repeat_last_n, seed, stop: [bytes], ignore_eos). */
typedef struct {
    int32_t *ids;
    int n;
    rlx_generate_params gp;
    char **stops;
    int n_stops;
} gen_args;

static void gen_args_free(gen_args *a)
{
    free(a->ids);
    for (int i = 0; i < a->n_stops; i++)
        free(a->stops[i]);
    free(a->stops);
    memset(a, 0, sizeof *a);
}

static int gen_args_parse(PyObject *args, gen_args *a)
{
    PyObject *seq, *stop;
    int max_tokens, top_k, repeat_last_n, ignore_eos;
    float temperature, top_p, min_p, penalty;
    unsigned long long seed;
    memset(a, 0, sizeof *a);
    if (!PyArg_ParseTuple(args,
                          "Oififffi"
                          "KOp",
                          &seq, &max_tokens, &temperature, &top_k, &top_p, &min_p, &penalty, &repeat_last_n, &seed,
                          &stop, &ignore_eos))
        return -1;
    rlx_generate_params_init(&a->gp);
    a->gp.max_tokens = max_tokens;
    a->gp.temperature = temperature;
    a->gp.top_k = top_k;
    a->gp.top_p = top_p;
    a->gp.min_p = min_p;
    a->gp.repeat_penalty = penalty;
    a->gp.repeat_last_n = repeat_last_n;
    a->gp.seed = seed;
    a->gp.ignore_eos = ignore_eos;
    if (!(a->ids = ids_of(seq, &a->n)))
        return -1;
    PyObject *f = PySequence_Fast(stop, "stop must be a list of str");
    if (!f)
        goto fail;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(f);
    a->stops = calloc((size_t)ns + 1, sizeof *a->stops);
    if (!a->stops) {
        Py_DECREF(f);
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        char *b;
        Py_ssize_t len;
        if (PyBytes_AsStringAndSize(PySequence_Fast_GET_ITEM(f, i), &b, &len) != 0 ||
            !(a->stops[a->n_stops] = strdup(b))) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            Py_DECREF(f);
            goto fail;
        }
        a->n_stops++;
    }
    Py_DECREF(f);
    a->gp.stop = (const char *const *)a->stops;
    a->gp.n_stop = a->n_stops;
    return 0;
fail:
    gen_args_free(a);
    return -1;
}

typedef struct {
    char *buf;
    size_t len, cap;
    int oom;
} text_buf;

static int collect_piece(void *user, int32_t id, const char *text, size_t len)
{
    (void)id;
    text_buf *t = user;
    if (t->len + len > t->cap) {
        size_t cap = (t->len + len) * 2 + 64;
        char *p = realloc(t->buf, cap);
        if (!p) {
            t->oom = 1;
            return 1;
        }
        t->buf = p, t->cap = cap;
    }
    memcpy(t->buf + t->len, text, len);
    t->len += len;
    return 0;
}

static PyObject *stats_dict(const rlx_generate_stats *s)
{
    return Py_BuildValue("{s:i,s:i,s:d,s:d}", "prompt_tokens", s->prompt_tokens, "generated_tokens",
                         s->generated_tokens, "prefill_ms", s->prefill_ms, "decode_ms", s->decode_ms);
}

/* generate(settings...) -> bytes, the generated text (GIL released). */
static PyObject *llm_generate(LLMObject *self, PyObject *args)
{
    gen_args a;
    if (!llm_ready(self) || gen_args_parse(args, &a) != 0)
        return NULL;
    if (llm_acquire(self, 0) != 0) {
        gen_args_free(&a);
        return NULL;
    }
    text_buf t = {NULL, 0, 0, 0};
    rlx_generate_stats stats;
    memset(&stats, 0, sizeof stats);
    rlx_status st;
    char msg[1024] = "";
    Py_BEGIN_ALLOW_THREADS st = rlx_llm_generate(self->c, a.ids, a.n, &a.gp, collect_piece, &t, &stats);
    if (st != RLX_OK)
        snprintf(msg, sizeof msg, "%s", rlx_last_error());
    Py_END_ALLOW_THREADS self->last = stats;
    self->has_last = 1;
    llm_release(self);
    gen_args_free(&a);
    PyObject *r = t.oom          ? PyErr_NoMemory()
                  : st != RLX_OK ? raise_msg(st, msg)
                                 : PyBytes_FromStringAndSize(t.buf ? t.buf : "", (Py_ssize_t)t.len);
    free(t.buf);
    return r;
}

static PyObject *llm_last_stats(LLMObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!self->has_last)
        Py_RETURN_NONE;
    return stats_dict(&self->last);
}

/* ------------------------------------------------------------ _Stream
 * One generation run by rlx_llm_generate on a thread of its own; each
 * token's text is handed over through a one-piece slot (the generator
 * waits while the slot is full, so it runs at most one token ahead of the
 * reader).  Starting it waits for the first piece, so that a failure
 * before any text raises there; __next__ waits without the GIL.  close(),
 * or the object's end (an iterator dropped midway), asks the generator to
 * stop at its next token, joins it and gives the LLM back. */

typedef struct {
    PyObject_HEAD LLMObject *llm; /* a reference held */
    gen_args a;
    pthread_t th;
    int running; /* the thread was started and not yet joined */
    int holds;   /* the LLM is ours */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int init;
    char *piece;
    size_t len, cap;
    int full, done, cancel;
    rlx_status st;
    char msg[1024];
    rlx_generate_stats stats;
} StreamObject;

static PyTypeObject StreamType;

static int stream_piece(void *user, int32_t id, const char *text, size_t len)
{
    (void)id;
    StreamObject *s = user;
    pthread_mutex_lock(&s->mu);
    while (s->full && !s->cancel)
        pthread_cond_wait(&s->cv, &s->mu);
    int stop = s->cancel;
    if (!stop && len > s->cap) {
        char *p = realloc(s->piece, len);
        if (p) {
            s->piece = p, s->cap = len;
        } else {
            s->st = RLX_ERR_OUT_OF_MEMORY;
            snprintf(s->msg, sizeof s->msg, "generate: no memory for a piece of %zu bytes", len);
            stop = 1;
        }
    }
    if (!stop) {
        if (len)
            memcpy(s->piece, text, len);
        s->len = len;
        s->full = 1;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return stop;
}

static void *stream_main(void *arg)
{
    StreamObject *s = arg;
    rlx_generate_stats stats;
    memset(&stats, 0, sizeof stats);
    rlx_status st = rlx_llm_generate(s->llm->c, s->a.ids, s->a.n, &s->a.gp, stream_piece, s, &stats);
    pthread_mutex_lock(&s->mu);
    if (st != RLX_OK && s->st == RLX_OK) {
        s->st = st;
        snprintf(s->msg, sizeof s->msg, "%s", rlx_last_error());
    }
    s->stats = stats;
    s->done = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Stops the generator (at its next token), joins it and gives the LLM back
 * (GIL held on entry; released while joining). */
static void stream_finish(StreamObject *s)
{
    if (s->running) {
        Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&s->mu);
        s->cancel = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->th, NULL);
        Py_END_ALLOW_THREADS s->running = 0;
        s->llm->last = s->stats;
        s->llm->has_last = 1;
    }
    if (s->holds) {
        llm_release(s->llm);
        s->holds = 0;
    }
}

static void stream_dealloc(StreamObject *s)
{
    if (s->llm)
        stream_finish(s);
    gen_args_free(&s->a);
    free(s->piece);
    if (s->init) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
    Py_XDECREF(s->llm);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* stream(settings...) -> _Stream, the generation started. */
static PyObject *llm_stream(LLMObject *self, PyObject *args)
{
    if (!llm_ready(self))
        return NULL;
    StreamObject *s = PyObject_New(StreamObject, &StreamType);
    if (!s)
        return NULL;
    memset((char *)s + sizeof(PyObject), 0, sizeof *s - sizeof(PyObject));
    if (gen_args_parse(args, &s->a) != 0) {
        Py_DECREF(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->init = 1;
    if (llm_acquire(self, 1) != 0) {
        Py_DECREF(s);
        return NULL;
    }
    Py_INCREF(self);
    s->llm = self;
    s->holds = 1;
    int e = pthread_create(&s->th, NULL, stream_main, s);
    if (e != 0) {
        Py_DECREF(s);
        return PyErr_Format(err_class[RLX_ERR_INTERNAL], "generate: cannot start a thread: %s", strerror(e));
    }
    s->running = 1;
    /* wait for the first piece or the end, so that what fails before any
     * text (the prompt, the settings, the context's size) raises here */
    int failed;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&s->mu);
    while (!s->full && !s->done)
        pthread_cond_wait(&s->cv, &s->mu);
    failed = s->done && s->st != RLX_OK;
    pthread_mutex_unlock(&s->mu);
    Py_END_ALLOW_THREADS if (failed)
    {
        stream_finish(s);
        raise_msg(s->st, s->msg);
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

static PyObject *stream_iternext(StreamObject *s)
{
    if (!s->holds)
        return NULL; /* over: StopIteration */
    pthread_mutex_lock(&s->llm->mu);
    s->llm->stream_thread = PyThread_get_thread_ident();
    pthread_mutex_unlock(&s->llm->mu);
    char *buf = NULL;
    size_t len = 0;
    int got = 0, oom = 0;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&s->mu);
    while (!s->full && !s->done)
        pthread_cond_wait(&s->cv, &s->mu);
    if (s->full) {
        got = 1;
        len = s->len;
        if ((buf = malloc(len + 1)) != NULL)
            memcpy(buf, s->piece, len);
        else
            oom = 1;
        s->full = 0;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    Py_END_ALLOW_THREADS if (got)
    {
        PyObject *r = oom ? PyErr_NoMemory() : PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
        free(buf);
        return r;
    }
    stream_finish(s); /* done: join and give the LLM back */
    if (s->st != RLX_OK)
        return raise_msg(s->st, s->msg);
    return NULL;
}

static PyObject *stream_close(StreamObject *s, PyObject *noargs)
{
    (void)noargs;
    stream_finish(s);
    Py_RETURN_NONE;
}

static PyMethodDef stream_methods[] = {
    {"close", (PyCFunction)stream_close, METH_NOARGS, "stop the generation and give the LLM back"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rlx._rlx._Stream",
    .tp_basicsize = sizeof(StreamObject),
    .tp_dealloc = (destructor)stream_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A generation in progress, its pieces as bytes (internal; see rlx.LLM.generate).",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)stream_iternext,
    .tp_methods = stream_methods,
};

static PyMethodDef llm_methods[] = {
    {"info", (PyCFunction)llm_info, METH_NOARGS, "the model's figures (rlx_llm_get_info) and the context's size"},
    {"tokenize", (PyCFunction)llm_tokenize, METH_VARARGS, "tokenize(text, add_special) -> [ids]"},
    {"detokenize", (PyCFunction)llm_detokenize, METH_O, "detokenize(ids) -> bytes"},
    {"token_piece", (PyCFunction)llm_token_piece, METH_VARARGS, "token_piece(id) -> bytes"},
    {"is_eog", (PyCFunction)llm_is_eog, METH_VARARGS, "is_eog(id) -> bool"},
    {"logits", (PyCFunction)llm_logits, METH_O, "logits(ids) -> float32 [vocab] after the last id"},
    {"generate", (PyCFunction)llm_generate, METH_VARARGS, "generate(ids, settings...) -> bytes"},
    {"stream", (PyCFunction)llm_stream, METH_VARARGS, "stream(ids, settings...) -> _Stream of bytes pieces"},
    {"last_stats", (PyCFunction)llm_last_stats, METH_NOARGS, "the last generation's figures, or None"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject LLMType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rlx._rlx._LLM",
    .tp_basicsize = sizeof(LLMObject),
    .tp_dealloc = (destructor)llm_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A decoder LLM and its generation context (internal; see rlx.LLM).",
    .tp_methods = llm_methods,
    .tp_init = (initproc)llm_init,
    .tp_new = PyType_GenericNew,
};

/* _parse_device(text) -> (kind, index): 0 cpu, 1 cuda; InvalidArgumentError
 * naming the text otherwise. */
static PyObject *py_parse_device(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *text = PyUnicode_AsUTF8(arg);
    rlx_device kind;
    int index;
    if (!text || parse_device(text, &kind, &index) != 0)
        return NULL;
    return Py_BuildValue("(ii)", (int)kind, index);
}

/* _check_device(text): raises why the device cannot be used, if it cannot. */
static PyObject *py_check_device(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *text = PyUnicode_AsUTF8(arg);
    rlx_device kind;
    int index;
    if (!text || parse_device(text, &kind, &index) != 0)
        return NULL;
    if (kind != RLX_DEVICE_CUDA)
        Py_RETURN_NONE;
    void *p = NULL;
    rlx_status st;
    Py_BEGIN_ALLOW_THREADS st = rlx_device_alloc(RLX_DEVICE_CUDA, index, 256, &p);
    rlx_device_free(RLX_DEVICE_CUDA, index, p);
    Py_END_ALLOW_THREADS if (st != RLX_OK) return raise_status(st);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ _Trainer */

typedef struct {
    PyObject_HEAD rlx_trainer *tr;
    pthread_mutex_t lock;
} TrainerObject;

static void trainer_dealloc(TrainerObject *self)
{
    if (self->tr) { /* the lock exists once tr does */
        rlx_trainer_free(self->tr);
        pthread_mutex_destroy(&self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* rlx_onnx_load_params' callback: each initializer into the trainer (one
 * that is no param of the graph, read only at import or not at all, is
 * skipped). */
static rlx_status trainer_load_one(void *user, const char *name, rlx_dtype t, int ndim, const int64_t *dims,
                                   const void *data, size_t bytes)
{
    (void)t, (void)ndim, (void)dims;
    rlx_tensor_info ti;
    if (rlx_session_find(rlx_trainer_session(user), 1, name, &ti) != RLX_OK)
        return RLX_OK;
    return rlx_trainer_set_param(user, name, data, bytes);
}

static int str_list(PyObject *o, const char ***out, int *n, PyObject **keep)
{
    *out = NULL;
    *n = 0;
    *keep = NULL;
    if (o == Py_None)
        return 0;
    PyObject *f = PySequence_Fast(o, "frozen must be a list of param names");
    if (!f)
        return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(f);
    const char **v = calloc((size_t)k + 1, sizeof *v);
    if (!v) {
        Py_DECREF(f);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(f, i);
        if (!PyUnicode_Check(it) || !(v[i] = PyUnicode_AsUTF8(it))) {
            free(v);
            Py_DECREF(f);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "frozen must be a list of param names (str)");
            return -1;
        }
    }
    *out = v;
    *n = (int)k;
    *keep = f;
    return 0;
}

static int trainer_init(TrainerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"source",     "loss",      "optimizer",    "lr",          "beta1",
                             "beta2",      "eps",       "weight_decay", "momentum",    "dampening",
                             "nesterov",   "clip_norm", "warmup_steps", "decay_steps", "min_lr",
                             "accumulate", "frozen",    "device",       "precision",   "threads",
                             "seed",       "shapes",    "grad_norm",    "recompute",   NULL};
    PyObject *source, *frozen = Py_None, *shapes = Py_None;
    const char *loss, *device = "cpu";
    rlx_train_options t;
    rlx_train_options_init(&t);
    int optimizer = (int)t.optimizer, nesterov = 0, precision = 0, threads = 0, grad_norm = 0, recompute = 0;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Os|idddddddpdiidiOsiiKOpp", kwlist, &source, &loss, &optimizer, &t.lr,
                                     &t.beta1, &t.beta2, &t.eps, &t.weight_decay, &t.momentum, &t.dampening, &nesterov,
                                     &t.clip_norm, &t.warmup_steps, &t.decay_steps, &t.min_lr, &t.accumulate, &frozen,
                                     &device, &precision, &threads, &seed, &shapes, &grad_norm, &recompute))
        return -1;
    t.grad_norm = grad_norm;
    t.recompute = recompute;
    if (self->tr) {
        PyErr_SetString(PyExc_RuntimeError, "_Trainer is already initialised");
        return -1;
    }
    t.optimizer = (rlx_optim_kind)optimizer;
    t.nesterov = nesterov;
    rlx_options o;
    if (parse_options(&o, device, precision, threads, 0) != 0)
        return -1;
    if (seed)
        o.seed = seed;
    PyObject *keep = NULL;
    const char **names = NULL;
    if (str_list(frozen, &names, &t.n_frozen, &keep) != 0)
        return -1;
    t.frozen = names;
    const rlx_graph *g = NULL;
    rlx_graph *imported = NULL;
    PyObject *pathb = NULL;
    rlx_onnx_binding b[64];
    int nb = 0;
    int ret = -1;
    if (PyObject_TypeCheck(source, &GraphType)) {
        g = ((GraphObject *)source)->g;
    } else {
        if (!PyUnicode_FSConverter(source, &pathb))
            goto out;
        if (shapes != Py_None) { /* {input name: shape} binds symbolic dims */
            if (!PyDict_Check(shapes)) {
                PyErr_SetString(PyExc_TypeError, "shapes must be a dict {input name: shape}");
                goto out;
            }
            PyObject *key, *val;
            Py_ssize_t pos = 0;
            while (PyDict_Next(shapes, &pos, &key, &val)) {
                if (nb == 64 || !PyUnicode_Check(key)) {
                    PyErr_SetString(PyExc_TypeError, "shapes: at most 64 entries, keyed by input name");
                    goto out;
                }
                memset(&b[nb], 0, sizeof b[nb]);
                b[nb].name = PyUnicode_AsUTF8(key);
                if (int64_list(val, b[nb].dims, RLX_MAX_DIMS, &b[nb].ndim, "shape") != 0)
                    goto out;
                nb++;
            }
        }
        rlx_onnx_options io;
        rlx_onnx_options_init(&io);
        io.initializers_as_params = 1;
        io.bindings = b;
        io.n_bindings = nb;
        rlx_status st;
        const char *path = PyBytes_AS_STRING(pathb);
        Py_BEGIN_ALLOW_THREADS st = rlx_onnx_import(path, &io, &imported);
        Py_END_ALLOW_THREADS if (st != RLX_OK)
        {
            raise_status(st);
            goto out;
        }
        g = imported;
    }
    rlx_status st;
    rlx_trainer *tr = NULL;
    Py_BEGIN_ALLOW_THREADS st = rlx_trainer_new(g, loss, &t, &o, &tr);
    if (st == RLX_OK && pathb)
        st = rlx_onnx_load_params(PyBytes_AS_STRING(pathb), trainer_load_one, tr);
    Py_END_ALLOW_THREADS if (st != RLX_OK)
    {
        raise_status(st);
        rlx_trainer_free(tr);
        goto out;
    }
    self->tr = tr;
    pthread_mutex_init(&self->lock, NULL);
    ret = 0;
out:
    rlx_graph_free(imported);
    Py_XDECREF(pathb);
    Py_XDECREF(keep);
    free(names);
    return ret;
}

static int trainer_ready(TrainerObject *self)
{
    if (!self->tr) {
        PyErr_SetString(PyExc_RuntimeError, "_Trainer is not initialised");
        return 0;
    }
    return 1;
}

/* An array for the step session's tensor `name` of `kind`, checked
 * against its dtype and size. */
static PyArrayObject *trainer_array(TrainerObject *self, int kind, const char *name, PyObject *v)
{
    rlx_tensor_info ti;
    rlx_status st = rlx_session_find(rlx_trainer_session(self->tr), kind, name, &ti);
    if (st != RLX_OK) {
        raise_status(st);
        return NULL;
    }
    PyArrayObject *a = as_input(v, name, ti.dtype);
    if (a && (size_t)PyArray_NBYTES(a) != ti.bytes) {
        char want[256], got[256];
        int64_t g[NPY_MAXDIMS];
        for (int d = 0; d < PyArray_NDIM(a); d++)
            g[d] = PyArray_DIM(a, d);
        PyErr_Format(err_class[RLX_ERR_SHAPE], "%s '%s' must have shape %s, got %s", kind ? "param" : "input", name,
                     shape_text(want, sizeof want, ti.ndim, ti.dims), shape_text(got, sizeof got, PyArray_NDIM(a), g));
        Py_DECREF(a);
        return NULL;
    }
    return a;
}

static PyObject *trainer_set_param(TrainerObject *self, PyObject *args)
{
    const char *name;
    PyObject *v;
    if (!PyArg_ParseTuple(args, "sO", &name, &v) || !trainer_ready(self))
        return NULL;
    PyArrayObject *a = trainer_array(self, 1, name, v);
    if (!a)
        return NULL;
    rlx_status st;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    st = rlx_trainer_set_param(self->tr, name, PyArray_DATA(a), (size_t)PyArray_NBYTES(a));
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS Py_DECREF(a);
    if (st != RLX_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

/* A param (kind 1) or an output of the last step (kind 2) as a new array. */
static PyObject *trainer_get(TrainerObject *self, PyObject *args, int kind)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name) || !trainer_ready(self))
        return NULL;
    rlx_tensor_info ti;
    rlx_status st = rlx_session_find(rlx_trainer_session(self->tr), kind, name, &ti);
    if (st != RLX_OK)
        return raise_status(st);
    npy_intp d[RLX_MAX_DIMS];
    for (int k = 0; k < ti.ndim; k++)
        d[k] = (npy_intp)ti.dims[k];
    PyObject *arr = PyArray_SimpleNew(ti.ndim, d, npy_of(ti.dtype));
    if (!arr)
        return NULL;
    void *data = PyArray_DATA((PyArrayObject *)arr);
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    st = kind == 1 ? rlx_trainer_get_param(self->tr, name, data, ti.bytes)
                   : rlx_trainer_get_output(self->tr, name, data, ti.bytes);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS if (st != RLX_OK)
    {
        Py_DECREF(arr);
        return raise_status(st);
    }
    return arr;
}

static PyObject *trainer_get_param(TrainerObject *self, PyObject *args) { return trainer_get(self, args, 1); }
static PyObject *trainer_get_output(TrainerObject *self, PyObject *args) { return trainer_get(self, args, 2); }

/* step({input: array}) -> the micro-batch's loss */
static PyObject *trainer_step(TrainerObject *self, PyObject *args)
{
    PyObject *feeds;
    if (!PyArg_ParseTuple(args, "O", &feeds) || !trainer_ready(self))
        return NULL;
    if (!PyDict_Check(feeds))
        return PyErr_Format(PyExc_TypeError, "inputs must be a dict {name: array}");
    Py_ssize_t n = PyDict_Size(feeds), pos = 0;
    PyArrayObject **arrs = calloc((size_t)n + 1, sizeof *arrs);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    PyObject *key, *val, *res = NULL;
    int k = 0;
    if (!arrs || !names) {
        free(arrs), free(names);
        return PyErr_NoMemory();
    }
    while (PyDict_Next(feeds, &pos, &key, &val)) {
        if (!PyUnicode_Check(key) || !(names[k] = PyUnicode_AsUTF8(key))) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "input names must be str");
            goto out;
        }
        if (!strncmp(names[k], "opt.", 4)) {
            PyErr_Format(err_class[RLX_ERR_INVALID_ARGUMENT], "input '%s' is the optimizer's own", names[k]);
            goto out;
        }
        if (!(arrs[k] = trainer_array(self, 0, names[k], val)))
            goto out;
        k++;
    }
    rlx_status st = RLX_OK;
    double loss = 0;
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    for (int i = 0; st == RLX_OK && i < k; i++)
        st = rlx_trainer_set_input(self->tr, names[i], PyArray_DATA(arrs[i]), (size_t)PyArray_NBYTES(arrs[i]));
    if (st == RLX_OK)
        st = rlx_trainer_step(self->tr, &loss);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS res = st == RLX_OK ? PyFloat_FromDouble(loss) : raise_status(st);
out:
    for (int i = 0; i < k; i++)
        Py_XDECREF(arrs[i]);
    free(arrs), free(names);
    return res;
}

static PyObject *trainer_counters(TrainerObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!trainer_ready(self))
        return NULL;
    return Py_BuildValue("(Ld)", (long long)rlx_trainer_steps(self->tr), rlx_trainer_lr(self->tr));
}

static PyObject *trainer_stats(TrainerObject *self, PyObject *noargs)
{
    (void)noargs;
    if (!trainer_ready(self))
        return NULL;
    rlx_compile_stats st;
    memset(&st, 0, sizeof st);
    rlx_status s = rlx_trainer_stats(self->tr, &st);
    if (s != RLX_OK)
        return raise_status(s);
    int count = 0;
    size_t bytes = 0;
    rlx_trainer_recomputed(self->tr, &count, &bytes);
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:i,s:n}", "arena_bytes", (Py_ssize_t)st.arena_bytes, "persistent_bytes",
                         (Py_ssize_t)st.persistent_bytes, "transient_bytes", (Py_ssize_t)st.transient_bytes,
                         "scratch_bytes", (Py_ssize_t)st.scratch_bytes, "recomputed", count, "recomputed_bytes",
                         (Py_ssize_t)bytes);
}

static PyObject *trainer_save(TrainerObject *self, PyObject *args)
{
    PyObject *pb = NULL;
    int force = 0;
    if (!PyArg_ParseTuple(args, "O&|p", PyUnicode_FSConverter, &pb, &force))
        return NULL;
    if (!trainer_ready(self)) {
        Py_DECREF(pb);
        return NULL;
    }
    rlx_status st;
    const char *path = PyBytes_AS_STRING(pb);
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    st = rlx_trainer_save(self->tr, path, force ? RLX_FILE_FORCE : 0);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS Py_DECREF(pb);
    if (st != RLX_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *trainer_load(TrainerObject *self, PyObject *args)
{
    PyObject *pb = NULL;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &pb))
        return NULL;
    if (!trainer_ready(self)) {
        Py_DECREF(pb);
        return NULL;
    }
    rlx_status st;
    const char *path = PyBytes_AS_STRING(pb);
    Py_BEGIN_ALLOW_THREADS pthread_mutex_lock(&self->lock);
    st = rlx_trainer_load(self->tr, path);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS Py_DECREF(pb);
    if (st != RLX_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *trainer_info(TrainerObject *self, PyObject *args)
{
    int kind;
    if (!PyArg_ParseTuple(args, "i", &kind) || !trainer_ready(self))
        return NULL;
    if (kind < 0 || kind > 2)
        return PyErr_Format(PyExc_ValueError, "kind must be 0, 1 or 2");
    return info_list(rlx_trainer_session(self->tr), kind);
}

static PyMethodDef trainer_methods[] = {
    {"set_param", (PyCFunction)trainer_set_param, METH_VARARGS, "set_param(name, array)"},
    {"get_param", (PyCFunction)trainer_get_param, METH_VARARGS, "get_param(name) -> array"},
    {"get_output", (PyCFunction)trainer_get_output, METH_VARARGS, "get_output(name) -> array of the last step"},
    {"step", (PyCFunction)trainer_step, METH_VARARGS, "step({name: array}) -> loss"},
    {"counters", (PyCFunction)trainer_counters, METH_NOARGS, "(optimizer steps taken, next learning rate)"},
    {"stats", (PyCFunction)trainer_stats, METH_NOARGS, "{arena, persistent, transient, scratch bytes; recomputed}"},
    {"save", (PyCFunction)trainer_save, METH_VARARGS, "save(path, force)"},
    {"load", (PyCFunction)trainer_load, METH_VARARGS, "load(path)"},
    {"info", (PyCFunction)trainer_info, METH_VARARGS, "info(kind) -> [(name, shape, dtype)]; 0 in, 1 param, 2 out"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject TrainerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "rlx._rlx._Trainer",
    .tp_basicsize = sizeof(TrainerObject),
    .tp_dealloc = (destructor)trainer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A graph's training step compiled with its optimizer (internal; see rlx.Trainer).",
    .tp_methods = trainer_methods,
    .tp_init = (initproc)trainer_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------ functions */

static PyObject *py_onnx_inputs(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(arg, &b))
        return NULL;
    rlx_onnx_input *ins = NULL;
    char **outs = NULL;
    int nin = 0, nout = 0;
    rlx_status st;
    const char *path = PyBytes_AS_STRING(b);
    Py_BEGIN_ALLOW_THREADS st = rlx_onnx_inputs(path, &ins, &nin, &outs, &nout);
    Py_END_ALLOW_THREADS Py_DECREF(b);
    if (st != RLX_OK)
        return raise_status(st);
    PyObject *li = PyList_New(nin), *lo = PyList_New(nout);
    for (int i = 0; li && i < nin; i++) {
        PyObject *dims;
        if (ins[i].ndim < 0) {
            dims = Py_None;
            Py_INCREF(dims);
        } else {
            dims = PyTuple_New(ins[i].ndim);
            for (int d = 0; dims && d < ins[i].ndim; d++) {
                PyObject *v;
                if (ins[i].dims[d] >= 0) {
                    v = PyLong_FromLongLong(ins[i].dims[d]);
                } else if (ins[i].dim_names[d]) {
                    v = PyUnicode_FromString(ins[i].dim_names[d]);
                } else {
                    v = Py_None;
                    Py_INCREF(v);
                }
                PyTuple_SET_ITEM(dims, d, v);
            }
        }
        PyList_SET_ITEM(
            li, i, Py_BuildValue("(siNii)", ins[i].name, (int)ins[i].dtype, dims, ins[i].is_tensor, ins[i].onnx_type));
    }
    for (int i = 0; lo && i < nout; i++)
        PyList_SET_ITEM(lo, i, PyUnicode_FromString(outs[i]));
    rlx_onnx_inputs_free(ins, nin, outs, nout);
    return Py_BuildValue("(NN)", li, lo);
}

/* [(name, kind)] of the graph outputs: kind 0 a tensor, else a sequence or
 * an optional (rlx_onnx_kind), which the package does not return. */
static PyObject *py_onnx_outputs(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(arg, &b))
        return NULL;
    rlx_onnx_input *outs = NULL;
    int nout = 0;
    rlx_status st;
    const char *path = PyBytes_AS_STRING(b);
    Py_BEGIN_ALLOW_THREADS st = rlx_onnx_outputs(path, &outs, &nout);
    Py_END_ALLOW_THREADS Py_DECREF(b);
    if (st != RLX_OK)
        return raise_status(st);
    PyObject *lo = PyList_New(nout);
    for (int i = 0; lo && i < nout; i++)
        PyList_SET_ITEM(lo, i, Py_BuildValue("(si)", outs[i].name ? outs[i].name : "", (int)outs[i].kind));
    rlx_onnx_inputs_free(outs, nout, NULL, 0);
    return lo;
}

static PyObject *tensor_array(rlx_dtype t, int nd, const int64_t *dims, void *data, size_t bytes)
{
    if (t == RLX_STRING) {
        PyObject *a = string_array(nd, dims, data, bytes);
        free(data);
        return a;
    }
    npy_intp d[RLX_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        d[i] = (npy_intp)dims[i];
    PyObject *a = PyArray_SimpleNew(nd, d, npy_of(t));
    if (a && bytes)
        memcpy(PyArray_DATA((PyArrayObject *)a), data, bytes);
    free(data);
    return a;
}

static PyObject *py_read_tensor(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(arg, &b))
        return NULL;
    rlx_dtype t;
    int nd;
    int64_t dims[RLX_MAX_DIMS];
    void *data = NULL;
    size_t bytes = 0;
    const char *path = PyBytes_AS_STRING(b);
    size_t len = strlen(path);
    rlx_status st = len > 4 && !strcmp(path + len - 4, ".npy")
                        ? rlx_npy_read(path, &t, &nd, dims, &data, &bytes)
                        : rlx_onnx_read_tensor(path, &t, &nd, dims, &data, &bytes);
    Py_DECREF(b);
    if (st != RLX_OK)
        return raise_status(st);
    return tensor_array(t, nd, dims, data, bytes);
}

static PyObject *py_print_info(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(arg, &b))
        return NULL;
    fflush(stdout);
    rlx_status st = rlx_onnx_print_info(PyBytes_AS_STRING(b), stdout);
    fflush(stdout);
    Py_DECREF(b);
    if (st != RLX_OK)
        return raise_status(st);
    Py_RETURN_NONE;
}

static PyObject *py_version(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(rlx_version());
}

static PyObject *py_gemm_info(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    return PyUnicode_FromString(rlx_cpu_gemm_info());
}

static PyObject *py_dtype_names(PyObject *self, PyObject *noargs)
{
    (void)self;
    (void)noargs;
    PyObject *t = PyTuple_New(RLX_DTYPE_COUNT);
    for (int i = 0; t && i < RLX_DTYPE_COUNT; i++)
        PyTuple_SET_ITEM(t, i, PyUnicode_FromString(rlx_dtype_name((rlx_dtype)i)));
    return t;
}

static PyMethodDef module_methods[] = {
    {"_to_dlpack", py_to_dlpack, METH_O, "capsule lending a numpy array's memory"},
    {"_from_dlpack_capsule", py_from_dlpack_capsule, METH_O, "numpy array over a DLPack capsule's memory"},
    {"_parse_device", py_parse_device, METH_O, "(kind, index) of 'cpu', 'cuda' or 'cuda:N' (kind 1: cuda)"},
    {"_check_device", py_check_device, METH_O, "raises why a device ('cuda:N') cannot be used"},
    {"onnx_inputs", py_onnx_inputs, METH_O, "([(name, dtype, dims, is_tensor, onnx_type)], [output names])"},
    {"onnx_outputs", py_onnx_outputs, METH_O, "[(name, kind)]: kind 0 a tensor, else a sequence or an optional"},
    {"read_tensor", py_read_tensor, METH_O, "a .npy or ONNX TensorProto .pb file as an array"},
    {"print_info", py_print_info, METH_O, "rlx info MODEL"},
    {"version", py_version, METH_NOARGS, "library version"},
    {"cpu_gemm_info", py_gemm_info, METH_NOARGS, "GEMM library"},
    {"dtype_names", py_dtype_names, METH_NOARGS, "dtype names by rlx_dtype"},
    {"ops_names", ops_names, METH_NOARGS, "(unary, binary) builder names"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                                        "_rlx",
                                        "RLX C extension (see the rlx package).",
                                        -1,
                                        module_methods,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL};

static int add_error(PyObject *m, const char *name, rlx_status st, PyObject *extra, const char *doc)
{
    char full[96];
    snprintf(full, sizeof full, "rlx.%s", name);
    PyObject *bases = extra ? PyTuple_Pack(2, err_base, extra) : PyTuple_Pack(1, err_base);
    if (!bases)
        return -1;
    PyObject *cls = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    Py_DECREF(bases);
    if (!cls)
        return -1;
    err_class[st] = cls;
    Py_INCREF(cls);
    return PyModule_AddObject(m, name, cls);
}

PyMODINIT_FUNC PyInit__rlx(void)
{
    import_array();
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (PyType_Ready(&SessionType) < 0 || PyType_Ready(&ModelType) < 0 || PyType_Ready(&GraphType) < 0 ||
        PyType_Ready(&DeviceBufType) < 0 || PyType_Ready(&LLMType) < 0 || PyType_Ready(&StreamType) < 0 ||
        PyType_Ready(&TrainerType) < 0)
        return NULL;
    Py_INCREF(&TrainerType);
    PyModule_AddObject(m, "_Trainer", (PyObject *)&TrainerType);
    Py_INCREF(&DeviceBufType);
    PyModule_AddObject(m, "_DeviceBuffer", (PyObject *)&DeviceBufType);
    Py_INCREF(&LLMType);
    PyModule_AddObject(m, "_LLM", (PyObject *)&LLMType);
    Py_INCREF(&StreamType);
    PyModule_AddObject(m, "_Stream", (PyObject *)&StreamType);
    Py_INCREF(&SessionType);
    PyModule_AddObject(m, "_Session", (PyObject *)&SessionType);
    Py_INCREF(&ModelType);
    PyModule_AddObject(m, "_Model", (PyObject *)&ModelType);
    Py_INCREF(&GraphType);
    PyModule_AddObject(m, "_Graph", (PyObject *)&GraphType);
    err_base =
        PyErr_NewExceptionWithDoc("rlx.RLXError", "An error reported by the RLX library (its message).", NULL, NULL);
    if (!err_base)
        return NULL;
    Py_INCREF(err_base);
    PyModule_AddObject(m, "RLXError", err_base);
    if (add_error(m, "InvalidArgumentError", RLX_ERR_INVALID_ARGUMENT, PyExc_ValueError, "A bad argument.") ||
        add_error(m, "ShapeError", RLX_ERR_SHAPE, PyExc_ValueError, "Shapes that do not fit.") ||
        add_error(m, "DTypeError", RLX_ERR_DTYPE, PyExc_TypeError, "Dtypes that do not fit.") ||
        add_error(m, "NotFoundError", RLX_ERR_NOT_FOUND, PyExc_LookupError, "An unknown name.") ||
        add_error(m, "UnsupportedError", RLX_ERR_UNSUPPORTED, NULL, "An op, dtype or device not available.") ||
        add_error(m, "RLXIOError", RLX_ERR_IO, PyExc_OSError, "A file missing, unreadable or unwritable.") ||
        add_error(m, "FormatError", RLX_ERR_FORMAT, NULL, "A malformed model or tensor file.") ||
        add_error(m, "OutOfMemoryError", RLX_ERR_OUT_OF_MEMORY, PyExc_MemoryError, "Out of memory.") ||
        add_error(m, "DeviceError", RLX_ERR_DEVICE, NULL, "A device runtime failure.") ||
        add_error(m, "RLXRuntimeError", RLX_ERR_RUNTIME, PyExc_RuntimeError, "A kernel found bad data.") ||
        add_error(m, "InternalError", RLX_ERR_INTERNAL, NULL, "A bug in RLX."))
        return NULL;
    return m;
}
