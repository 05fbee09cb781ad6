#include "glue/registry.h"

#include <cstring>
#include <string>

namespace stoker::glue {

Registry& R() {
  static Registry r;
  return r;
}

void InternNames() {
  Registry& r = R();
  r.s_dtype = PyUnicode_InternFromString("dtype");
  r.s_shape = PyUnicode_InternFromString("shape");
  r.s_is_cpu = PyUnicode_InternFromString("is_cpu");
  r.s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
  r.s_contiguous = PyUnicode_InternFromString("contiguous");
  r.s_data_ptr = PyUnicode_InternFromString("data_ptr");
  r.s_layout = PyUnicode_InternFromString("layout");
  r.s_resolve_conj = PyUnicode_InternFromString("resolve_conj");
  r.s_resolve_neg = PyUnicode_InternFromString("resolve_neg");
  r.s_fields = PyUnicode_InternFromString("_fields");
}

static void Set(PyObject** slot, PyObject* obj) {
  Py_XINCREF(obj);
  Py_XSETREF(*slot, obj);
}

bool RegisterObject(const char* name, PyObject* obj) {
  Registry& r = R();
  if (obj == Py_None) obj = nullptr;
  for (int i = 0; i < static_cast<int>(DType::kNumDTypes); ++i) {
    if (std::string("torch.") + DTypeName(static_cast<DType>(i)) == name) {
      Set(&r.torch_dtypes[i], obj);
      return true;
    }
  }
  struct { const char* n; PyObject** p; } table[] = {
      {"torch.Tensor", &r.tensor_type},        {"numpy.ndarray", &r.ndarray_type},
      {"from_dlpack", &r.from_dlpack},         {"numpy.asarray", &r.np_asarray},
      {"numpy.ascontiguousarray", &r.np_ascontiguous},
      {"dumps_with_leaves", &r.dumps_with_leaves}, {"loads_with_leaves", &r.loads_with_leaves},
      {"pickle.dumps", &r.dumps_plain},        {"pickle.loads", &r.loads_plain},
      {"torch.strided", &r.strided},
  };
  for (auto& e : table) {
    if (std::strcmp(e.n, name) == 0) {
      Set(e.p, obj);
      return true;
    }
  }
  PyErr_Format(PyExc_KeyError, "stoker: unknown registry name %s", name);
  return false;
}

bool DTypeFromTorch(PyObject* dtype, DType* out) {
  Registry& r = R();
  for (int i = 0; i < static_cast<int>(DType::kNumDTypes); ++i) {
    if (r.torch_dtypes[i] == dtype && dtype != nullptr) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

bool DTypeFromFormat(const char* fmt, Py_ssize_t itemsize, DType* out) {
  if (*fmt == '@' || *fmt == '=' || *fmt == '<') ++fmt;
  else if (*fmt == '>' || *fmt == '!') return false;  // big-endian: let Python handle it
  if (fmt[0] == 'Z') {
    if (fmt[1] == 'f' && fmt[2] == 0) { *out = DType::kComplex64; return true; }
    if (fmt[1] == 'd' && fmt[2] == 0) { *out = DType::kComplex128; return true; }
    return false;
  }
  if (fmt[0] == 0 || fmt[1] != 0) return false;
  const bool is_signed = (fmt[0] == 'b' || fmt[0] == 'h' || fmt[0] == 'i' || fmt[0] == 'l' || fmt[0] == 'q');
  const bool is_unsigned = (fmt[0] == 'B' || fmt[0] == 'H' || fmt[0] == 'I' || fmt[0] == 'L' || fmt[0] == 'Q');
  if (is_signed || is_unsigned) {
    switch (itemsize) {
      case 1: *out = is_signed ? DType::kInt8 : DType::kUInt8; return true;
      case 2: *out = is_signed ? DType::kInt16 : DType::kUInt16; return true;
      case 4: *out = is_signed ? DType::kInt32 : DType::kUInt32; return true;
      case 8: *out = is_signed ? DType::kInt64 : DType::kUInt64; return true;
      default: return false;
    }
  }
  switch (fmt[0]) {
    case '?': *out = DType::kBool; return itemsize == 1;
    case 'e': *out = DType::kFloat16; return itemsize == 2;
    case 'f': *out = DType::kFloat32; return itemsize == 4;
    case 'd': *out = DType::kFloat64; return itemsize == 8;
    default: return false;
  }
}

const char* DTypeFormat(DType d) {
  static constexpr const char* kFormats[] = {"?", "B", "b", "h", "i", "q", "H", "I", "Q",
                                             "e", nullptr, "f", "d", "Zf", "Zd"};
  return kFormats[static_cast<int>(d)];
}

}  // namespace stoker::glue
