#include "glue/py_collate.h"

#include <cstring>

#include "glue/registry.h"
#include "shm/arena.h"

namespace stoker::glue {

namespace {
constexpr int kMaxDepth = 64;
constexpr uint64_t kReleaseGilBytes = 1 << 20;

// Everything a tensor or array leaf needs, probed with as few Python calls as
// possible.  `shape` is a new reference (a tuple).
struct Probe {
  PyObject* dtype = nullptr;  // borrowed identity (dtype objects are singletons)
  PyObject* shape = nullptr;
  PyObject* owner = nullptr;  // the contiguous tensor the data belongs to (new ref)
  const uint8_t* data = nullptr;
};

bool TruthyAttr(PyObject* o, PyObject* name, bool* out) {
  PyObject* v = PyObject_GetAttr(o, name);
  if (!v) return false;
  *out = PyObject_IsTrue(v) == 1;
  Py_DECREF(v);
  return true;
}

// Probes a torch tensor.  Returns false with a Python error set or
// *supported = false for something the fast path does not handle.
bool ProbeTensor(PyObject* t, Probe* p, bool* supported) {
  Registry& r = R();
  *supported = false;
  PyObject* dtype = PyObject_GetAttr(t, r.s_dtype);
  if (!dtype) return false;
  p->dtype = dtype;
  Py_DECREF(dtype);
  bool is_cpu = false;
  if (!TruthyAttr(t, r.s_is_cpu, &is_cpu)) return false;
  if (!is_cpu) return true;
  PyObject* cont = PyObject_CallMethodNoArgs(t, r.s_is_contiguous);
  if (!cont) return false;
  const bool contiguous = cont == Py_True;
  Py_DECREF(cont);
  Py_INCREF(t);
  p->owner = t;
  if (!contiguous) {
    PyObject* c = PyObject_CallMethodNoArgs(t, r.s_contiguous);
    if (!c) return false;
    Py_SETREF(p->owner, c);
  }
  DType dt;
  if (DTypeFromTorch(p->dtype, &dt) && (dt == DType::kComplex64 || dt == DType::kComplex128)) {
    for (PyObject* m : {r.s_resolve_conj, r.s_resolve_neg}) {
      PyObject* c = PyObject_CallMethodNoArgs(p->owner, m);
      if (!c) return false;
      Py_SETREF(p->owner, c);
    }
  }
  p->shape = PyObject_GetAttr(p->owner, r.s_shape);
  if (!p->shape) return false;
  if (!PyTuple_Check(p->shape)) return true;
  PyObject* ptr = PyObject_CallMethodNoArgs(p->owner, r.s_data_ptr);
  if (!ptr) return false;
  p->data = static_cast<const uint8_t*>(PyLong_AsVoidPtr(ptr));
  Py_DECREF(ptr);
  if (PyErr_Occurred()) return false;
  *supported = true;
  return true;
}

void ReleaseProbe(Probe* p) {
  Py_CLEAR(p->shape);
  Py_CLEAR(p->owner);
}

bool ShapeOf(PyObject* tuple, std::vector<int64_t>* shape, uint64_t* numel) {
  const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  if (n > kMaxDims) return false;
  shape->clear();
  *numel = 1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (d < 0) {
      PyErr_Clear();
      return false;
    }
    shape->push_back(d);
    *numel *= static_cast<uint64_t>(d);
  }
  return true;
}

// Converts "Python error or unsupported" into a fallback in collate mode:
// torch's default_collate then produces the exact result or exact error.
PlanResult Fallback() {
  PyErr_Clear();
  return PlanResult::kFallback;
}
}  // namespace

PyCollate::~PyCollate() {
  for (auto& v : views_) PyBuffer_Release(&v);
  for (PyObject* o : keep_) Py_DECREF(o);
}

bool PyCollate::IsTensor(PyObject* o) const {
  PyObject* t = R().tensor_type;
  return t && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(t));
}

bool PyCollate::IsArray(PyObject* o) const {
  PyObject* t = R().ndarray_type;
  return t && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(t));
}

uint64_t PyCollate::LeafNode(Tag tag, DType dtype, const int64_t* shape, int ndim, uint64_t nbytes) {
  tree_.PutTag(tag);
  tree_.Put<uint8_t>(static_cast<uint8_t>(dtype));
  tree_.Put<uint8_t>(static_cast<uint8_t>(ndim));
  for (int i = 0; i < ndim; ++i) tree_.Put<int64_t>(shape[i]);
  const uint64_t off = AlignUp(data_bytes_, kLeafAlign);
  patches_.push_back(tree_.size());
  tree_.Put<uint64_t>(off);
  tree_.Put<uint64_t>(nbytes);
  data_bytes_ = off + nbytes;
  return off;
}

PlanResult PyCollate::TensorLeaf(PyObject* t, Leaf* leaf) {
  Probe p;
  bool supported = false;
  const bool ok = ProbeTensor(t, &p, &supported);
  PlanResult res = PlanResult::kFallback;
  uint64_t numel = 0;
  if (!ok) {
    res = PlanResult::kError;
  } else if (supported && DTypeFromTorch(p.dtype, &leaf->dtype) && ShapeOf(p.shape, &leaf->shape, &numel)) {
    leaf->nbytes = numel * DTypeSize(leaf->dtype);
    leaf->data = p.data;
    if (leaf->nbytes == 0 || leaf->data != nullptr) {
      Keep(p.owner);
      p.owner = nullptr;
      res = PlanResult::kOk;
    }
  }
  ReleaseProbe(&p);
  return res;
}

PlanResult PyCollate::ArrayLeaf(PyObject* a, Leaf* leaf) {
  Py_buffer view;
  const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
  if (PyObject_GetBuffer(a, &view, flags) != 0) {
    PyErr_Clear();
    if (!R().np_ascontiguous) return PlanResult::kFallback;
    PyObject* c = PyObject_CallOneArg(R().np_ascontiguous, a);
    if (!c) return PlanResult::kError;
    Keep(c);
    if (PyObject_GetBuffer(c, &view, flags) != 0) {
      PyErr_Clear();
      return PlanResult::kFallback;
    }
  }
  views_.push_back(view);
  if (!view.format || !DTypeFromFormat(view.format, view.itemsize, &leaf->dtype) || view.ndim > kMaxDims)
    return PlanResult::kFallback;
  leaf->shape.assign(view.shape, view.shape + view.ndim);
  leaf->nbytes = static_cast<uint64_t>(view.len);
  leaf->data = static_cast<const uint8_t*>(view.buf);
  return PlanResult::kOk;
}

// ---- Collate mode ---------------------------------------------------------

PlanResult PyCollate::Collate(PyObject* samples) {
  if (!PyList_Check(samples) || PyList_GET_SIZE(samples) == 0) return PlanResult::kFallback;
  return CollateNode(samples, 0);
}

PlanResult PyCollate::CollateTensors(PyObject* samples) {
  const Py_ssize_t n = PyList_GET_SIZE(samples);
  Leaf first;
  PlanResult r = TensorLeaf(PyList_GET_ITEM(samples, 0), &first);
  if (r != PlanResult::kOk) return Fallback();
  PyObject* shape0 = PyObject_GetAttr(keep_.back(), R().s_shape);  // keep_.back(): first's data owner
  if (!shape0) return Fallback();
  Keep(shape0);
  {  // default_collate refuses nested and sparse tensors: let it say so.
    PyObject* layout = PyObject_GetAttr(PyList_GET_ITEM(samples, 0), R().s_layout);
    if (!layout) return Fallback();
    const bool strided = layout == R().strided;
    Py_DECREF(layout);
    if (!strided) return Fallback();
  }
  PyTypeObject* type0 = Py_TYPE(PyList_GET_ITEM(samples, 0));
  std::vector<int64_t> shape{static_cast<int64_t>(n)};
  shape.insert(shape.end(), first.shape.begin(), first.shape.end());
  const uint64_t each = first.nbytes;
  if (shape.size() > static_cast<size_t>(kMaxDims)) return Fallback();
  const uint64_t base = LeafNode(numpy_mode_ ? Tag::kArray : Tag::kTensor, first.dtype, shape.data(),
                                 static_cast<int>(shape.size()), each * n);
  copies_.push_back({first.data, 0, each, base});
  for (Py_ssize_t i = 1; i < n; ++i) {
    PyObject* t = PyList_GET_ITEM(samples, i);
    if (Py_TYPE(t) != type0 && !IsTensor(t)) return Fallback();
    Probe p;
    bool supported = false;
    if (!ProbeTensor(t, &p, &supported) || !supported) {
      ReleaseProbe(&p);
      return Fallback();
    }
    DType dt;
    const bool same = DTypeFromTorch(p.dtype, &dt) && dt == first.dtype &&
                      PyObject_RichCompareBool(p.shape, shape0, Py_EQ) == 1;
    if (!same || (each != 0 && p.data == nullptr)) {
      ReleaseProbe(&p);
      return Fallback();
    }
    copies_.push_back({p.data, 0, each, base + each * static_cast<uint64_t>(i)});
    Keep(p.owner);
    p.owner = nullptr;
    ReleaseProbe(&p);
  }
  return PlanResult::kOk;
}

PlanResult PyCollate::CollateArrays(PyObject* samples) {
  const Py_ssize_t n = PyList_GET_SIZE(samples);
  Leaf first;
  if (ArrayLeaf(PyList_GET_ITEM(samples, 0), &first) != PlanResult::kOk) return Fallback();
  std::vector<int64_t> shape{static_cast<int64_t>(n)};
  shape.insert(shape.end(), first.shape.begin(), first.shape.end());
  if (shape.size() > static_cast<size_t>(kMaxDims)) return Fallback();
  const uint64_t each = first.nbytes;
  const uint64_t base = LeafNode(numpy_mode_ ? Tag::kArray : Tag::kTensor, first.dtype, shape.data(),
                                 static_cast<int>(shape.size()), each * n);
  copies_.push_back({first.data, 0, each, base});
  for (Py_ssize_t i = 1; i < n; ++i) {
    PyObject* a = PyList_GET_ITEM(samples, i);
    if (!IsArray(a)) return Fallback();
    Leaf l;
    if (ArrayLeaf(a, &l) != PlanResult::kOk || l.dtype != first.dtype || l.shape != first.shape)
      return Fallback();
    copies_.push_back({l.data, 0, each, base + each * static_cast<uint64_t>(i)});
  }
  return PlanResult::kOk;
}

PlanResult PyCollate::CollateNumbers(PyObject* samples, bool is_float) {
  const Py_ssize_t n = PyList_GET_SIZE(samples);
  const int64_t shape[1] = {n};
  const uint64_t off0 = scratch_.size();
  if (is_float) {
    scratch_.resize(off0 + 8 * n);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* x = PyList_GET_ITEM(samples, i);
      double v;
      if (PyFloat_Check(x)) v = PyFloat_AS_DOUBLE(x);
      else if (PyLong_Check(x)) v = PyLong_AsDouble(x);
      else return Fallback();
      if (v == -1.0 && PyErr_Occurred()) return Fallback();
      std::memcpy(&scratch_[off0 + 8 * i], &v, 8);
    }
    const uint64_t dst = LeafNode(numpy_mode_ ? Tag::kArray : Tag::kTensor, DType::kFloat64, shape, 1, 8 * n);
    copies_.push_back({nullptr, off0, uint64_t(8 * n), dst});
    return PlanResult::kOk;
  }
  const bool bools = PyBool_Check(PyList_GET_ITEM(samples, 0));
  const uint64_t width = bools ? 1 : 8;
  scratch_.resize(off0 + width * n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* x = PyList_GET_ITEM(samples, i);
    if (bools) {
      if (!PyBool_Check(x)) return Fallback();
      scratch_[off0 + i] = x == Py_True ? 1 : 0;
    } else {
      if (!PyLong_Check(x) || PyBool_Check(x)) return Fallback();
      long long v = PyLong_AsLongLong(x);
      if (v == -1 && PyErr_Occurred()) return Fallback();
      std::memcpy(&scratch_[off0 + 8 * i], &v, 8);
    }
  }
  const uint64_t dst = LeafNode(numpy_mode_ ? Tag::kArray : Tag::kTensor,
                                bools ? DType::kBool : DType::kInt64, shape, 1, width * n);
  copies_.push_back({nullptr, off0, width * n, dst});
  return PlanResult::kOk;
}

PlanResult PyCollate::CollateNode(PyObject* samples, int depth) {
  if (depth > kMaxDepth) return PlanResult::kFallback;
  const Py_ssize_t n = PyList_GET_SIZE(samples);
  PyObject* elem = PyList_GET_ITEM(samples, 0);
  if (IsTensor(elem)) return CollateTensors(samples);
  if (IsArray(elem)) return CollateArrays(samples);
  if (PyFloat_Check(elem)) return CollateNumbers(samples, true);
  if (PyLong_Check(elem)) return CollateNumbers(samples, false);
  if (PyUnicode_Check(elem) || PyBytes_Check(elem)) {
    // default_collate returns the list of strings itself.
    return PreserveNode(samples, depth + 1) == PlanResult::kOk ? PlanResult::kOk : Fallback();
  }
  if (PyDict_CheckExact(elem)) {
    for (Py_ssize_t i = 1; i < n; ++i)
      if (!PyDict_CheckExact(PyList_GET_ITEM(samples, i))) return PlanResult::kFallback;
    tree_.PutTag(Tag::kDict);
    tree_.Put<uint32_t>(static_cast<uint32_t>(PyDict_GET_SIZE(elem)));
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(elem, &pos, &key, &value)) {
      if (PreserveNode(key, depth + 1) != PlanResult::kOk) return Fallback();
      PyObject* column = PyList_New(n);
      if (!column) return Fallback();
      Keep(column);
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* v = PyDict_GetItemWithError(PyList_GET_ITEM(samples, i), key);
        if (!v) return Fallback();  // missing key: torch raises KeyError
        Py_INCREF(v);
        PyList_SET_ITEM(column, i, v);
      }
      PlanResult r = CollateNode(column, depth + 1);
      if (r != PlanResult::kOk) return r;
    }
    return PlanResult::kOk;
  }
  const bool is_tuple = PyTuple_Check(elem);
  const bool named = is_tuple && !PyTuple_CheckExact(elem) &&
                     PyObject_HasAttr(reinterpret_cast<PyObject*>(Py_TYPE(elem)), R().s_fields);
  if (PyList_CheckExact(elem) || PyTuple_CheckExact(elem) || named) {
    const Py_ssize_t width = PySequence_Fast_GET_SIZE(elem);
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* s = PyList_GET_ITEM(samples, i);
      const bool ok = named ? Py_TYPE(s) == Py_TYPE(elem) : (PyList_CheckExact(s) || PyTuple_CheckExact(s));
      if (!ok || PySequence_Fast_GET_SIZE(s) != width) return PlanResult::kFallback;
    }
    if (named) {
      tree_.PutTag(Tag::kNamedTuple);
      if (PickleNode(reinterpret_cast<PyObject*>(Py_TYPE(elem))) != PlanResult::kOk) return Fallback();
    } else {
      tree_.PutTag(Tag::kList);  // default_collate turns tuples into lists
    }
    tree_.Put<uint32_t>(static_cast<uint32_t>(width));
    for (Py_ssize_t j = 0; j < width; ++j) {
      PyObject* column = PyList_New(n);
      if (!column) return Fallback();
      Keep(column);
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* v = PySequence_Fast_GET_ITEM(PyList_GET_ITEM(samples, i), j);
        Py_INCREF(v);
        PyList_SET_ITEM(column, i, v);
      }
      PlanResult r = CollateNode(column, depth + 1);
      if (r != PlanResult::kOk) return r;
    }
    return PlanResult::kOk;
  }
  return PlanResult::kFallback;
}

// ---- Preserve mode --------------------------------------------------------

PlanResult PyCollate::Preserve(PyObject* obj) { return PreserveNode(obj, 0); }

PlanResult PyCollate::PickleNode(PyObject* obj) {
  Registry& r = R();
  PyObject* res = PyObject_CallOneArg(r.dumps_with_leaves, obj);
  if (!res) return PlanResult::kError;
  Keep(res);
  PyObject* data = nullptr;
  PyObject* leaves = nullptr;
  if (!PyTuple_Check(res) || PyTuple_GET_SIZE(res) != 2 || !PyBytes_Check(data = PyTuple_GET_ITEM(res, 0)) ||
      !PyList_Check(leaves = PyTuple_GET_ITEM(res, 1))) {
    PyErr_SetString(PyExc_TypeError, "stoker: dumps_with_leaves must return (bytes, list)");
    return PlanResult::kError;
  }
  // Plan the leaves on a copy of the state so an unsupported leaf can undo.
  const size_t tree_mark = tree_.size(), patch_mark = patches_.size(), copy_mark = copies_.size();
  const uint64_t data_mark = data_bytes_;
  tree_.PutTag(Tag::kPickle);
  tree_.Put<uint32_t>(static_cast<uint32_t>(PyList_GET_SIZE(leaves)));
  bool leaves_ok = true;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(leaves) && leaves_ok; ++i) {
    PyObject* leaf_obj = PyList_GET_ITEM(leaves, i);
    Leaf leaf;
    const bool tensor = IsTensor(leaf_obj);
    PlanResult lr = tensor ? TensorLeaf(leaf_obj, &leaf) : ArrayLeaf(leaf_obj, &leaf);
    if (lr == PlanResult::kError) return lr;
    if (lr != PlanResult::kOk) {
      leaves_ok = false;
      break;
    }
    const uint64_t dst = LeafNode(tensor ? Tag::kTensor : Tag::kArray, leaf.dtype, leaf.shape.data(),
                                  static_cast<int>(leaf.shape.size()), leaf.nbytes);
    copies_.push_back({leaf.data, 0, leaf.nbytes, dst});
  }
  if (!leaves_ok) {  // pickle everything by value instead
    std::string head = tree_.bytes().substr(0, tree_mark);
    tree_.clear();
    tree_.PutBytes(head.data(), head.size());
    patches_.resize(patch_mark);
    copies_.resize(copy_mark);
    data_bytes_ = data_mark;
    data = PyObject_CallOneArg(r.dumps_plain, obj);
    if (!data) return PlanResult::kError;
    Keep(data);
    tree_.PutTag(Tag::kPickle);
    tree_.Put<uint32_t>(0);
  }
  const uint64_t len = static_cast<uint64_t>(PyBytes_GET_SIZE(data));
  const uint64_t off = AlignUp(data_bytes_, kLeafAlign);
  patches_.push_back(tree_.size());
  tree_.Put<uint64_t>(off);
  tree_.Put<uint64_t>(len);
  data_bytes_ = off + len;
  copies_.push_back({reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(data)), 0, len, off});
  return PlanResult::kOk;
}

PlanResult PyCollate::PreserveNode(PyObject* obj, int depth) {
  if (depth > kMaxDepth) return PickleNode(obj);
  if (obj == Py_None) {
    tree_.PutTag(Tag::kNone);
    return PlanResult::kOk;
  }
  if (PyBool_Check(obj)) {
    tree_.PutTag(Tag::kBool);
    tree_.Put<uint8_t>(obj == Py_True);
    return PlanResult::kOk;
  }
  if (PyLong_CheckExact(obj)) {
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return PickleNode(obj);
    }
    tree_.PutTag(Tag::kInt);
    tree_.Put<int64_t>(v);
    return PlanResult::kOk;
  }
  if (PyFloat_CheckExact(obj)) {
    tree_.PutTag(Tag::kFloat);
    tree_.Put<double>(PyFloat_AS_DOUBLE(obj));
    return PlanResult::kOk;
  }
  if (PyUnicode_CheckExact(obj)) {
    Py_ssize_t len;
    const char* s = PyUnicode_AsUTF8AndSize(obj, &len);
    if (!s || len > UINT32_MAX) {
      PyErr_Clear();
      return PickleNode(obj);
    }
    tree_.PutTag(Tag::kStr);
    tree_.Put<uint32_t>(static_cast<uint32_t>(len));
    tree_.PutBytes(s, static_cast<size_t>(len));
    return PlanResult::kOk;
  }
  if (PyBytes_CheckExact(obj) && PyBytes_GET_SIZE(obj) <= UINT32_MAX) {
    tree_.PutTag(Tag::kBytes);
    tree_.Put<uint32_t>(static_cast<uint32_t>(PyBytes_GET_SIZE(obj)));
    tree_.PutBytes(PyBytes_AS_STRING(obj), static_cast<size_t>(PyBytes_GET_SIZE(obj)));
    return PlanResult::kOk;
  }
  const bool tensor = IsTensor(obj);
  if (tensor || (R().ndarray_type && Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(R().ndarray_type))) {
    Leaf leaf;
    PlanResult r = tensor ? TensorLeaf(obj, &leaf) : ArrayLeaf(obj, &leaf);
    if (r == PlanResult::kError) return r;
    if (r != PlanResult::kOk) return PickleNode(obj);
    const Tag tag = (tensor && !numpy_mode_) ? Tag::kTensor : Tag::kArray;
    const uint64_t dst = LeafNode(tag, leaf.dtype, leaf.shape.data(), static_cast<int>(leaf.shape.size()), leaf.nbytes);
    copies_.push_back({leaf.data, 0, leaf.nbytes, dst});
    return PlanResult::kOk;
  }
  if (PyDict_CheckExact(obj)) {
    tree_.PutTag(Tag::kDict);
    tree_.Put<uint32_t>(static_cast<uint32_t>(PyDict_GET_SIZE(obj)));
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(obj, &pos, &k, &v)) {
      PlanResult r = PreserveNode(k, depth + 1);
      if (r == PlanResult::kOk) r = PreserveNode(v, depth + 1);
      if (r != PlanResult::kOk) return r;
    }
    return PlanResult::kOk;
  }
  const bool named = PyTuple_Check(obj) && !PyTuple_CheckExact(obj) &&
                     PyObject_HasAttr(reinterpret_cast<PyObject*>(Py_TYPE(obj)), R().s_fields);
  if (PyList_CheckExact(obj) || PyTuple_CheckExact(obj) || named) {
    if (named) {
      tree_.PutTag(Tag::kNamedTuple);
      PlanResult r = PickleNode(reinterpret_cast<PyObject*>(Py_TYPE(obj)));
      if (r != PlanResult::kOk) return r;
    } else {
      tree_.PutTag(PyList_CheckExact(obj) ? Tag::kList : Tag::kTuple);
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
    tree_.Put<uint32_t>(static_cast<uint32_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
      PlanResult r = PreserveNode(PySequence_Fast_GET_ITEM(obj, i), depth + 1);
      if (r != PlanResult::kOk) return r;
    }
    return PlanResult::kOk;
  }
  return PickleNode(obj);
}

// ---- Writing --------------------------------------------------------------

uint64_t PyCollate::total_bytes() const {
  return AlignUp(sizeof(BatchHeader) + tree_.size(), kLeafAlign) + data_bytes_;
}

void PyCollate::WriteTo(uint8_t* region) {
  const uint64_t data_start = AlignUp(sizeof(BatchHeader) + tree_.size(), kLeafAlign);
  for (size_t pos : patches_) {
    uint64_t rel;
    std::memcpy(&rel, tree_.bytes().data() + pos, sizeof rel);
    tree_.Patch64(pos, rel + data_start);
  }
  BatchHeader h{kBatchMagic, kBatchVersion, sizeof(BatchHeader), tree_.size(), total_bytes()};
  std::memcpy(region, &h, sizeof h);
  std::memcpy(region + sizeof h, tree_.bytes().data(), tree_.size());
  uint64_t copy_bytes = 0;
  for (const CopyOp& c : copies_) copy_bytes += c.n;
  auto run = [&] {
    for (const CopyOp& c : copies_) {
      const uint8_t* src = c.src ? c.src : reinterpret_cast<const uint8_t*>(scratch_.data()) + c.scratch_off;
      if (c.n) std::memcpy(region + data_start + c.dst, src, c.n);
    }
  };
  if (copy_bytes >= kReleaseGilBytes) {
    Py_BEGIN_ALLOW_THREADS
    run();
    Py_END_ALLOW_THREADS
  } else {
    run();
  }
}

}  // namespace stoker::glue
