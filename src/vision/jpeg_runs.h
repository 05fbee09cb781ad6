// Whether this CPU runs the libjpeg-turbo this build links.  One built from
// source with BMI2 (STOKER_JPEG_FROM_SOURCE on a machine that has it,
// cmake/libjpeg_turbo.cmake) needs a CPU that has BMI2 too: every JPEG path
// asks here first, so that such a CPU gets this error, not an illegal
// instruction.
#ifndef STOKER_VISION_JPEG_RUNS_H_
#define STOKER_VISION_JPEG_RUNS_H_

#include "core/cpu_features.h"
#include "stoker/status.h"

namespace stoker {

inline Status JpegRuns() {
#ifdef STOKER_JPEG_NEEDS_BMI2
  if (!Cpu().bmi2)
    return Status::Internal(
        "this build of stoker compiled its libjpeg-turbo for BMI2 (STOKER_JPEG_FROM_SOURCE on a machine that has "
        "it), and this CPU lacks BMI2: build stoker on this machine, or with -DSTOKER_JPEG_FROM_SOURCE=OFF");
#endif
  return Status::OK();
}

}  // namespace stoker

#endif  // STOKER_VISION_JPEG_RUNS_H_
