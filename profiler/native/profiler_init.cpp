#include "profiler_init.h"

#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include "log.h"

namespace profiler {

std::string init_profiler(int device, std::string& chip) {
  CUpti_Profiler_Initialize_Params initialize{};
  initialize.structSize = CUpti_Profiler_Initialize_Params_STRUCT_SIZE;
  PROFILER_CUPTI_OR_RETURN(cuptiProfilerInitialize(&initialize));
  CUpti_Device_GetChipName_Params name{};
  name.structSize = CUpti_Device_GetChipName_Params_STRUCT_SIZE;
  name.deviceIndex = static_cast<size_t>(device);
  PROFILER_CUPTI_OR_RETURN(cuptiDeviceGetChipName(&name));
  chip = name.pChipName;
  return std::string();
}

}  // namespace profiler
