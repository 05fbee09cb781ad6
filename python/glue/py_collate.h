// PyCollate: turns Python batch objects into the slot byte format
// (src/shm/batch_format.h) in two steps: Plan (walk the objects, lay out the
// tree and the leaves, keep the sources alive) and WriteTo (copy into the
// slot region).  Planning first lets the worker ask for a bigger region
// before writing a single byte.
//
// Two planning modes:
//  * Collate: the list of samples is collated with torch's default_collate
//    semantics (same structure, dtypes and values), stacking straight into
//    the slot.  Unusual inputs return kFallback and the caller runs torch's
//    default_collate in Python (for its exact result or exact error).
//  * Preserve: an already-collated object (a user collate_fn's result) is
//    written as it is; tensors and arrays become leaves (zero-copy on the
//    other side); other objects travel as a pickle stored in the slot, with
//    any tensors inside still carried as leaves.
//
// REQUIRES: the GIL for Plan and for WriteTo's bookkeeping (WriteTo releases
// it for large copies).
#ifndef STOKER_PY_COLLATE_H_
#define STOKER_PY_COLLATE_H_

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shm/batch_format.h"

namespace stoker::glue {

enum class PlanResult { kOk, kFallback, kError /* Python error set */ };

class PyCollate {
 public:
  explicit PyCollate(bool numpy_mode) : numpy_mode_(numpy_mode) {}
  ~PyCollate();
  PyCollate(const PyCollate&) = delete;
  PyCollate& operator=(const PyCollate&) = delete;

  PlanResult Collate(PyObject* samples);
  PlanResult Preserve(PyObject* obj);
  // Bytes the region must hold.
  uint64_t total_bytes() const;
  // REQUIRES: capacity >= total_bytes().
  void WriteTo(uint8_t* region);

 private:
  struct CopyOp {
    const uint8_t* src;   // nullptr: from scratch_
    uint64_t scratch_off;
    uint64_t n;
    uint64_t dst;         // from the start of the data area
  };
  struct Leaf {
    DType dtype;
    std::vector<int64_t> shape;
    const uint8_t* data;
    uint64_t nbytes;
  };

  PlanResult CollateNode(PyObject* samples, int depth);
  PlanResult CollateTensors(PyObject* samples);
  PlanResult CollateArrays(PyObject* samples);
  PlanResult CollateNumbers(PyObject* samples, bool is_float);
  PlanResult PreserveNode(PyObject* obj, int depth);
  PlanResult PickleNode(PyObject* obj);
  // Fills *leaf from a CPU torch tensor / numeric numpy array.
  PlanResult TensorLeaf(PyObject* t, Leaf* leaf);
  PlanResult ArrayLeaf(PyObject* a, Leaf* leaf);
  bool IsTensor(PyObject* o) const;
  bool IsArray(PyObject* o) const;
  // Writes a leaf node header and reserves `nbytes` of data; returns the
  // data offset (relative to the data area).
  uint64_t LeafNode(Tag tag, DType dtype, const int64_t* shape, int ndim, uint64_t nbytes);
  void Keep(PyObject* o) { keep_.push_back(o); }

  bool numpy_mode_;
  TreeWriter tree_;
  std::vector<size_t> patches_;  // tree positions of leaf offsets to rebase
  std::vector<CopyOp> copies_;
  std::string scratch_;
  uint64_t data_bytes_ = 0;
  std::vector<PyObject*> keep_;
  std::vector<Py_buffer> views_;
};

}  // namespace stoker::glue

#endif  // STOKER_PY_COLLATE_H_
