// Python objects the glue needs (torch's dtypes and Tensor type, numpy's
// ndarray, helper functions), registered once at import by stoker/_native.py
// so that the extension never links against torch or numpy.
//
// Thread safety: written once under the GIL at import; read under the GIL.
#ifndef STOKER_PY_REGISTRY_H_
#define STOKER_PY_REGISTRY_H_

#include <Python.h>

#include <cstdint>

#include "shm/batch_format.h"

namespace stoker::glue {

struct Registry {
  PyObject* torch_dtypes[static_cast<int>(DType::kNumDTypes)] = {};  // None where torch lacks one
  PyObject* tensor_type = nullptr;      // torch.Tensor or None
  PyObject* ndarray_type = nullptr;     // numpy.ndarray or None
  PyObject* from_dlpack = nullptr;      // torch._C._from_dlpack
  PyObject* np_asarray = nullptr;       // numpy.asarray
  PyObject* np_ascontiguous = nullptr;  // numpy.ascontiguousarray
  PyObject* dumps_with_leaves = nullptr;  // stoker._pickle.dumps_with_leaves
  PyObject* loads_with_leaves = nullptr;  // stoker._pickle.loads_with_leaves
  PyObject* dumps_plain = nullptr;        // pickle.dumps
  PyObject* loads_plain = nullptr;        // pickle.loads
  // Interned attribute names.
  PyObject *s_dtype, *s_shape, *s_is_cpu, *s_is_contiguous, *s_contiguous, *s_data_ptr,
      *s_layout, *s_resolve_conj, *s_resolve_neg, *s_fields;
  PyObject* strided = nullptr;  // torch.strided
};

Registry& R();
// Registers `obj` under `name`; returns false with a Python error for an unknown name.
bool RegisterObject(const char* name, PyObject* obj);
void InternNames();

// torch dtype object -> DType (identity compare).  False if unknown.
bool DTypeFromTorch(PyObject* dtype, DType* out);
// PEP 3118 format + itemsize -> DType.  False for non-numeric formats.
bool DTypeFromFormat(const char* fmt, Py_ssize_t itemsize, DType* out);
// DType -> PEP 3118 format string for exporting buffers (nullptr: bfloat16).
const char* DTypeFormat(DType d);

}  // namespace stoker::glue

#endif  // STOKER_PY_REGISTRY_H_
