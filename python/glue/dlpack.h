// The DLPack ABI (v0.x "dltensor" capsules), written from the DLPack
// specification.  Only the C structs stoker produces are declared; every
// torch 2.x accepts them through torch._C._from_dlpack.
#ifndef STOKER_PY_DLPACK_H_
#define STOKER_PY_DLPACK_H_

#include <cstdint>

namespace stoker::glue::dl {

enum DeviceType : int32_t { kCPU = 1 };
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kComplex = 5, kBool = 6 };

struct Device {
  int32_t device_type;
  int32_t device_id;
};
struct DataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements
  uint64_t byte_offset;
};
struct ManagedTensor {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor* self);
};

inline constexpr const char* kCapsuleName = "dltensor";
inline constexpr const char* kUsedCapsuleName = "used_dltensor";

}  // namespace stoker::glue::dl

#endif  // STOKER_PY_DLPACK_H_
