// One sample of a native dataset as bytes per field (a str field's as a
// str), for the slow path (__getitem__): sizes asked, buffers made, `read`
// fills them, all without the GIL.
#ifndef STOKER_PYTHON_GLUE_READ_SAMPLE_H_
#define STOKER_PYTHON_GLUE_READ_SAMPLE_H_

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "glue/errors.h"
#include "stoker/native_dataset.h"

namespace stoker::glue {

// read(dst) writes the sample to dst[f] (SampleBytes' sizes).
template <class Read>
pybind11::list ReadSample(NativeDataset& d, uint64_t index, Read&& read) {
  std::vector<uint64_t> sizes(d.fields().size());
  std::vector<std::string> bufs;
  std::vector<uint8_t*> dst;
  Status st;
  {
    pybind11::gil_scoped_release nogil;
    st = d.SampleBytes(index, sizes.data());
    if (st.ok()) {
      for (uint64_t s : sizes) bufs.emplace_back(s, '\0');
      for (std::string& b : bufs) dst.push_back(reinterpret_cast<uint8_t*>(b.data()));
      st = read(dst.data());
    }
  }
  Check(st);
  pybind11::list out;
  for (size_t f = 0; f < bufs.size(); ++f)  // (a str field's sample as the str, as in a batch)
    if (d.fields()[f].leaf == FieldLeaf::kStr) out.append(pybind11::str(bufs[f]));
    else out.append(pybind11::bytes(bufs[f]));
  return out;
}

}  // namespace stoker::glue

#endif  // STOKER_PYTHON_GLUE_READ_SAMPLE_H_
