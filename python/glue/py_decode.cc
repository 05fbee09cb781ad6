#include "glue/py_decode.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "glue/dlpack.h"
#include "glue/registry.h"
#include "shm/batch_format.h"

namespace stoker::glue {

namespace {

// Who keeps a leaf's bytes alive: a slot lease, or a private heap copy.
struct LeafOwner {
  SlotLease* lease = nullptr;
  void* heap = nullptr;
  void Drop() {
    if (lease) lease->Unref();
    std::free(heap);
    lease = nullptr;
    heap = nullptr;
  }
};

// ---- DLPack export ----

struct Managed {
  dl::ManagedTensor m;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
  LeafOwner owner;
};

void ManagedDeleter(dl::ManagedTensor* self) {
  auto* m = reinterpret_cast<Managed*>(self);
  m->owner.Drop();
  delete m;
}

void CapsuleDestructor(PyObject* cap) {
  if (!PyCapsule_IsValid(cap, dl::kCapsuleName)) return;  // consumed: the tensor owns it
  auto* m = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(cap, dl::kCapsuleName));
  if (m && m->deleter) m->deleter(m);
}

dl::DataType ToDL(DType d) {
  const uint8_t bits = static_cast<uint8_t>(DTypeSize(d) * 8);
  switch (d) {
    case DType::kBool: return {dl::kBool, 8, 1};
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64:
      return {dl::kUInt, bits, 1};
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
      return {dl::kInt, bits, 1};
    case DType::kBFloat16: return {dl::kBfloat, 16, 1};
    case DType::kComplex64: case DType::kComplex128: return {dl::kComplex, bits, 1};
    default: return {dl::kFloat, bits, 1};
  }
}

// Takes ownership of `owner` in every case.
PyObject* MakeTensor(DType dtype, const int64_t* shape, int ndim, uint8_t* data, LeafOwner owner) {
  if (!R().from_dlpack) {
    owner.Drop();
    PyErr_SetString(PyExc_RuntimeError, "stoker: torch is not available to build tensors");
    return nullptr;
  }
  auto* m = new Managed();
  m->owner = owner;
  int64_t stride = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    m->shape[i] = shape[i];
    m->strides[i] = stride;
    stride *= shape[i] > 0 ? shape[i] : 1;
  }
  m->m.dl_tensor = dl::Tensor{data, {dl::kCPU, 0}, ndim, ToDL(dtype), m->shape, m->strides, 0};
  m->m.manager_ctx = m;
  m->m.deleter = ManagedDeleter;
  PyObject* cap = PyCapsule_New(&m->m, dl::kCapsuleName, CapsuleDestructor);
  if (!cap) {
    ManagedDeleter(&m->m);
    return nullptr;
  }
  PyObject* t = PyObject_CallOneArg(R().from_dlpack, cap);
  Py_DECREF(cap);  // runs the deleter if torch did not take it
  return t;
}

// ---- Buffer-protocol export (numpy) ----

struct HostBuffer {
  PyObject_HEAD
  uint8_t* data;
  int ndim;
  Py_ssize_t itemsize;
  const char* format;
  Py_ssize_t shape[kMaxDims];
  Py_ssize_t strides[kMaxDims];
  LeafOwner owner;
};

int HostBufferGet(PyObject* self, Py_buffer* view, int /*flags*/) {
  auto* b = reinterpret_cast<HostBuffer*>(self);
  Py_ssize_t len = b->itemsize;
  for (int i = 0; i < b->ndim; ++i) len *= b->shape[i];
  view->buf = b->data;
  view->obj = Py_NewRef(self);
  view->len = len;
  view->readonly = 0;
  view->itemsize = b->itemsize;
  view->format = const_cast<char*>(b->format);
  view->ndim = b->ndim;
  view->shape = b->shape;
  view->strides = b->strides;
  view->suboffsets = nullptr;
  view->internal = nullptr;
  return 0;
}

void HostBufferDealloc(PyObject* self) {
  reinterpret_cast<HostBuffer*>(self)->owner.Drop();
  Py_TYPE(self)->tp_free(self);
}

PyBufferProcs g_host_buffer_procs = {HostBufferGet, nullptr};
PyTypeObject g_host_buffer_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* MakeArray(DType dtype, const int64_t* shape, int ndim, uint8_t* data, LeafOwner owner) {
  const char* fmt = DTypeFormat(dtype);
  if (!fmt || !R().np_asarray) {
    if (R().from_dlpack) return MakeTensor(dtype, shape, ndim, data, owner);
    owner.Drop();
    PyErr_Format(PyExc_TypeError, "stoker: cannot build a numpy array of dtype %s", DTypeName(dtype));
    return nullptr;
  }
  auto* b = PyObject_New(HostBuffer, &g_host_buffer_type);
  if (!b) {
    owner.Drop();
    return nullptr;
  }
  b->data = data;
  b->ndim = ndim;
  b->itemsize = DTypeSize(dtype);
  b->format = fmt;
  b->owner = owner;
  Py_ssize_t stride = b->itemsize;
  for (int i = ndim - 1; i >= 0; --i) {
    b->shape[i] = shape[i];
    b->strides[i] = stride;
    stride *= shape[i] > 0 ? shape[i] : 1;
  }
  PyObject* arr = PyObject_CallOneArg(R().np_asarray, reinterpret_cast<PyObject*>(b));
  Py_DECREF(b);
  return arr;
}

// ---- Tree walk ----

class Decoder {
 public:
  Decoder(SlotLease* lease, const uint8_t* region, uint64_t used, uint32_t slot, bool numpy_mode, bool copy_out)
      : lease_(lease), region_(region), used_(used), slot_(slot), numpy_(numpy_mode), copy_(copy_out) {}

  PyObject* Run() {
    BatchHeader h;
    if (used_ < sizeof h) return Corrupt("region shorter than its header");
    std::memcpy(&h, region_, sizeof h);
    if (h.magic != kBatchMagic || h.version != kBatchVersion) return Corrupt("bad magic or version");
    if (h.tree_offset > used_ || h.tree_bytes > used_ - h.tree_offset) return Corrupt("tree out of bounds");
    TreeReader r(region_ + h.tree_offset, h.tree_bytes);
    PyObject* out = Node(r, 0);
    if (out && !r.done()) {
      Py_DECREF(out);
      return Corrupt("trailing bytes after the tree");
    }
    return out;
  }

 private:
  PyObject* Corrupt(const char* what) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_RuntimeError, "stoker: corrupt batch in slot %u (%s); this is a bug, please report it",
                   slot_, what);
    return nullptr;
  }

  PyObject* Leaf(Tag tag, TreeReader& r) {
    uint8_t dt, ndim;
    if (!r.Get(&dt) || !r.Get(&ndim) || dt >= static_cast<uint8_t>(DType::kNumDTypes) || ndim > kMaxDims)
      return Corrupt("bad leaf header");
    int64_t shape[kMaxDims];
    uint64_t numel = 1;
    for (int i = 0; i < ndim; ++i) {
      if (!r.Get(&shape[i]) || shape[i] < 0) return Corrupt("bad leaf shape");
      numel *= static_cast<uint64_t>(shape[i]);
    }
    uint64_t off, nbytes;
    if (!r.Get(&off) || !r.Get(&nbytes)) return Corrupt("bad leaf extent");
    const auto dtype = static_cast<DType>(dt);
    if (nbytes != numel * DTypeSize(dtype) || off > used_ || nbytes > used_ - off)
      return Corrupt("leaf out of bounds");
    LeafOwner owner;
    uint8_t* data = const_cast<uint8_t*>(region_ + off);
    if (copy_) {
      owner.heap = std::malloc(nbytes ? nbytes : 1);
      if (!owner.heap) return PyErr_NoMemory();
      std::memcpy(owner.heap, data, nbytes);
      data = static_cast<uint8_t*>(owner.heap);
    } else {
      lease_->Ref();
      owner.lease = lease_;
    }
    const bool array = tag == Tag::kArray || numpy_;
    return array ? MakeArray(dtype, shape, ndim, data, owner) : MakeTensor(dtype, shape, ndim, data, owner);
  }

  PyObject* Pickled(TreeReader& r, int depth) {
    uint32_t nleaves;
    if (!r.Get(&nleaves)) return Corrupt("bad pickle node");
    PyObject* leaves = PyList_New(nleaves);
    if (!leaves) return nullptr;
    for (uint32_t i = 0; i < nleaves; ++i) {
      uint8_t t;
      if (!r.Get(&t) || (t != static_cast<uint8_t>(Tag::kTensor) && t != static_cast<uint8_t>(Tag::kArray))) {
        Py_DECREF(leaves);
        return Corrupt("bad pickle leaf");
      }
      PyObject* leaf = Leaf(static_cast<Tag>(t), r);
      if (!leaf) {
        Py_DECREF(leaves);
        return nullptr;
      }
      PyList_SET_ITEM(leaves, i, leaf);
    }
    uint64_t off, len;
    if (!r.Get(&off) || !r.Get(&len) || off > used_ || len > used_ - off) {
      Py_DECREF(leaves);
      return Corrupt("pickle out of bounds");
    }
    PyObject* mv = PyMemoryView_FromMemory(reinterpret_cast<char*>(const_cast<uint8_t*>(region_ + off)),
                                           static_cast<Py_ssize_t>(len), PyBUF_READ);
    PyObject* out = nullptr;
    if (mv) {
      out = nleaves ? PyObject_CallFunctionObjArgs(R().loads_with_leaves, mv, leaves, nullptr)
                    : PyObject_CallOneArg(R().loads_plain, mv);
      Py_DECREF(mv);
    }
    Py_DECREF(leaves);
    (void)depth;
    return out;
  }

  PyObject* Node(TreeReader& r, int depth) {
    if (depth > 128) return Corrupt("tree too deep");
    uint8_t t;
    if (!r.Get(&t)) return Corrupt("truncated tree");
    switch (static_cast<Tag>(t)) {
      case Tag::kTensor:
      case Tag::kArray:
        return Leaf(static_cast<Tag>(t), r);
      case Tag::kNone:
        Py_RETURN_NONE;
      case Tag::kBool: {
        uint8_t v;
        if (!r.Get(&v)) return Corrupt("bad bool");
        return PyBool_FromLong(v);
      }
      case Tag::kInt: {
        int64_t v;
        if (!r.Get(&v)) return Corrupt("bad int");
        return PyLong_FromLongLong(v);
      }
      case Tag::kFloat: {
        double v;
        if (!r.Get(&v)) return Corrupt("bad float");
        return PyFloat_FromDouble(v);
      }
      case Tag::kStr:
      case Tag::kBytes: {
        uint32_t len;
        const uint8_t* p;
        if (!r.Get(&len) || !r.GetBytes(len, &p)) return Corrupt("bad string");
        return static_cast<Tag>(t) == Tag::kStr
                   ? PyUnicode_DecodeUTF8(reinterpret_cast<const char*>(p), len, "strict")
                   : PyBytes_FromStringAndSize(reinterpret_cast<const char*>(p), len);
      }
      case Tag::kStrAt:
      case Tag::kBytesAt: {
        uint64_t off, len;
        if (!r.Get(&off) || !r.Get(&len) || off > used_ || len > used_ - off) return Corrupt("string out of bounds");
        const char* p = reinterpret_cast<const char*>(region_ + off);
        return static_cast<Tag>(t) == Tag::kStrAt ? PyUnicode_DecodeUTF8(p, static_cast<Py_ssize_t>(len), "strict")
                                                  : PyBytes_FromStringAndSize(p, static_cast<Py_ssize_t>(len));
      }
      case Tag::kList:
      case Tag::kTuple: {
        uint32_t n;
        if (!r.Get(&n)) return Corrupt("bad sequence");
        const bool list = static_cast<Tag>(t) == Tag::kList;
        PyObject* out = list ? PyList_New(n) : PyTuple_New(n);
        if (!out) return nullptr;
        for (uint32_t i = 0; i < n; ++i) {
          PyObject* c = Node(r, depth + 1);
          if (!c) {
            Py_DECREF(out);
            return nullptr;
          }
          if (list) PyList_SET_ITEM(out, i, c); else PyTuple_SET_ITEM(out, i, c);
        }
        return out;
      }
      case Tag::kDict: {
        uint32_t n;
        if (!r.Get(&n)) return Corrupt("bad dict");
        PyObject* out = PyDict_New();
        if (!out) return nullptr;
        for (uint32_t i = 0; i < n; ++i) {
          PyObject* k = Node(r, depth + 1);
          PyObject* v = k ? Node(r, depth + 1) : nullptr;
          if (!v || PyDict_SetItem(out, k, v) != 0) {
            Py_XDECREF(k);
            Py_XDECREF(v);
            Py_DECREF(out);
            return nullptr;
          }
          Py_DECREF(k);
          Py_DECREF(v);
        }
        return out;
      }
      case Tag::kNamedTuple: {
        PyObject* type = Node(r, depth + 1);
        if (!type) return nullptr;
        uint32_t n;
        PyObject* args = r.Get(&n) ? PyTuple_New(n) : nullptr;
        if (!args) {
          Py_DECREF(type);
          return Corrupt("bad namedtuple");
        }
        for (uint32_t i = 0; i < n; ++i) {
          PyObject* c = Node(r, depth + 1);
          if (!c) {
            Py_DECREF(args);
            Py_DECREF(type);
            return nullptr;
          }
          PyTuple_SET_ITEM(args, i, c);
        }
        PyObject* out = PyObject_Call(type, args, nullptr);
        Py_DECREF(args);
        Py_DECREF(type);
        return out;
      }
      case Tag::kPickle:
        return Pickled(r, depth);
    }
    return Corrupt("unknown node tag");
  }

  SlotLease* lease_;
  const uint8_t* region_;
  uint64_t used_;
  uint32_t slot_;
  bool numpy_;
  bool copy_;
};

}  // namespace

PyObject* DecodeSlot(const std::shared_ptr<Engine>& engine, uint32_t slot, bool numpy_mode, bool copy_out) {
  uint64_t used = 0, capacity = 0;
  const uint8_t* region = engine->SlotRegion(slot, &used, &capacity);
  if (used > capacity) {
    engine->Release(slot);
    PyErr_Format(PyExc_RuntimeError, "stoker: slot %u claims %llu bytes in a %llu-byte region", slot,
                 static_cast<unsigned long long>(used), static_cast<unsigned long long>(capacity));
    return nullptr;
  }
  engine->MarkHeld(slot);
  auto* lease = new SlotLease(engine, slot);  // the decoder's own reference
  PyObject* out = Decoder(lease, region, used, slot, numpy_mode, copy_out).Run();
  lease->Unref();  // frees the slot now if no view was made (or all were copies)
  return out;
}

PyObject* DecodeCopy(const uint8_t* data, uint64_t used, bool numpy_mode) {
  return Decoder(nullptr, data, used, ~uint32_t{0}, numpy_mode, /*copy_out=*/true).Run();
}

bool InitHostBufferType(PyObject* module) {
  g_host_buffer_type.tp_name = "stoker._stoker.HostBuffer";
  g_host_buffer_type.tp_basicsize = sizeof(HostBuffer);
  g_host_buffer_type.tp_flags = Py_TPFLAGS_DEFAULT;
  g_host_buffer_type.tp_doc = "Exports slot memory to numpy through the buffer protocol.";
  g_host_buffer_type.tp_dealloc = HostBufferDealloc;
  g_host_buffer_type.tp_as_buffer = &g_host_buffer_procs;
  g_host_buffer_type.tp_new = nullptr;
  if (PyType_Ready(&g_host_buffer_type) < 0) return false;
  Py_INCREF(&g_host_buffer_type);
  return PyModule_AddObject(module, "HostBuffer", reinterpret_cast<PyObject*>(&g_host_buffer_type)) == 0;
}

}  // namespace stoker::glue
