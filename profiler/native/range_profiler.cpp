#include "range_profiler.h"

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include "log.h"
#include "profiler_init.h"

namespace profiler {

namespace {

std::string new_host(const std::string& chip, const std::vector<uint8_t>& availability,
                     CUpti_Profiler_Host_Object** host) {
  CUpti_Profiler_Host_Initialize_Params params{};
  params.structSize = CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE;
  params.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  params.pChipName = chip.c_str();
  params.pCounterAvailabilityImage = availability.data();
  PROFILER_CUPTI_OR_RETURN(cuptiProfilerHostInitialize(&params));
  *host = params.pHostObject;
  return std::string();
}

void delete_host(CUpti_Profiler_Host_Object* host) {
  CUpti_Profiler_Host_Deinitialize_Params params{};
  params.structSize = CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE;
  params.pHostObject = host;
  cuptiProfilerHostDeinitialize(&params);
}

CUptiResult add(CUpti_Profiler_Host_Object* host, const char* const* names, size_t count) {
  CUpti_Profiler_Host_ConfigAddMetrics_Params params{};
  params.structSize = CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE;
  params.pHostObject = host;
  params.ppMetricNames = const_cast<const char**>(names);
  params.numMetrics = count;
  return cuptiProfilerHostConfigAddMetrics(&params);
}

}  // namespace

std::string RangeProfiler::init(CUcontext ctx, int device, const std::vector<std::string>& metrics) {
  const std::string initialized = init_profiler(device, chip_);
  if (!initialized.empty()) return initialized;

  CUpti_Profiler_GetCounterAvailability_Params availability{};
  availability.structSize = CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE;
  availability.ctx = ctx;
  PROFILER_CUPTI_OR_RETURN(cuptiProfilerGetCounterAvailability(&availability));
  std::vector<uint8_t> image(availability.counterAvailabilityImageSize);
  availability.pCounterAvailabilityImage = image.data();
  PROFILER_CUPTI_OR_RETURN(cuptiProfilerGetCounterAvailability(&availability));

  const std::string added = add_metrics(image, metrics);
  if (!added.empty()) return added;

  CUpti_Profiler_Host_GetConfigImageSize_Params size{};
  size.structSize = CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE;
  size.pHostObject = host_;
  PROFILER_CUPTI_OR_RETURN(cuptiProfilerHostGetConfigImageSize(&size));
  config_.resize(size.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params config{};
  config.structSize = CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE;
  config.pHostObject = host_;
  config.configImageSize = config_.size();
  config.pConfigImage = config_.data();
  PROFILER_CUPTI_OR_RETURN(cuptiProfilerHostGetConfigImage(&config));
  CUpti_Profiler_Host_GetNumOfPasses_Params passes{};
  passes.structSize = CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE;
  passes.configImageSize = config_.size();
  passes.pConfigImage = config_.data();
  PROFILER_CUPTI_OR_RETURN(cuptiProfilerHostGetNumOfPasses(&passes));
  passes_ = passes.numOfPasses;

  CUpti_RangeProfiler_Enable_Params enable{};
  enable.structSize = CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE;
  enable.ctx = ctx;
  PROFILER_CUPTI_OR_RETURN(cuptiRangeProfilerEnable(&enable));
  range_ = enable.pRangeProfilerObject;
  CUpti_RangeProfiler_GetCounterDataSize_Params data{};
  data.structSize = CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE;
  data.pRangeProfilerObject = range_;
  data.pMetricNames = names_.data();
  data.numMetrics = names_.size();
  data.maxNumOfRanges = 1;
  data.maxNumRangeTreeNodes = 1;
  PROFILER_CUPTI_OR_RETURN(cuptiRangeProfilerGetCounterDataSize(&data));
  counter_data_.resize(data.counterDataSize);
  return std::string();
}

// All metrics at once; where that fails (a metric the chip lacks makes the whole call fail and leaves the
// host object unusable), each one alone on a host object of its own, to find the ones to leave out.
std::string RangeProfiler::add_metrics(const std::vector<uint8_t>& availability,
                                       const std::vector<std::string>& wanted) {
  std::vector<const char*> all;
  for (const std::string& name : wanted) all.push_back(name.c_str());
  std::string problem = new_host(chip_, availability, &host_);
  if (!problem.empty()) return problem;
  if (!all.empty() && add(host_, all.data(), all.size()) == CUPTI_SUCCESS) {
    metrics_ = wanted;
  } else {
    delete_host(host_);
    host_ = nullptr;
    for (const std::string& name : wanted) {
      CUpti_Profiler_Host_Object* alone = nullptr;
      problem = new_host(chip_, availability, &alone);
      if (!problem.empty()) return problem;
      const char* one = name.c_str();
      (add(alone, &one, 1) == CUPTI_SUCCESS ? metrics_ : unsupported_).push_back(name);
      delete_host(alone);
    }
    if (metrics_.empty()) return "the device supports none of the requested metrics";
    problem = new_host(chip_, availability, &host_);
    if (!problem.empty()) return problem;
    std::vector<const char*> supported;
    for (const std::string& name : metrics_) supported.push_back(name.c_str());
    PROFILER_CUPTI_OR_RETURN(add(host_, supported.data(), supported.size()));
  }
  for (const std::string& name : metrics_) names_.push_back(name.c_str());
  return std::string();
}

std::string RangeProfiler::begin() {
  if (range_ == nullptr) return "the range profiler is not enabled";
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params init{};
  init.structSize = CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE;
  init.pRangeProfilerObject = range_;
  init.counterDataSize = counter_data_.size();
  init.pCounterData = counter_data_.data();
  PROFILER_CUPTI_OR_RETURN(cuptiRangeProfilerCounterDataImageInitialize(&init));
  CUpti_RangeProfiler_SetConfig_Params set{};
  set.structSize = CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE;
  set.pRangeProfilerObject = range_;
  set.configSize = config_.size();
  set.pConfig = config_.data();
  set.counterDataImageSize = counter_data_.size();
  set.pCounterDataImage = counter_data_.data();
  set.range = CUPTI_AutoRange;
  set.replayMode = CUPTI_KernelReplay;
  set.maxRangesPerPass = 1;
  set.numNestingLevels = 1;
  set.minNestingLevel = 1;
  set.passIndex = 0;
  set.targetNestingLevel = 1;
  PROFILER_CUPTI_OR_RETURN(cuptiRangeProfilerSetConfig(&set));
  CUpti_RangeProfiler_Start_Params start{};
  start.structSize = CUpti_RangeProfiler_Start_Params_STRUCT_SIZE;
  start.pRangeProfilerObject = range_;
  PROFILER_CUPTI_OR_RETURN(cuptiRangeProfilerStart(&start));
  started_ = true;
  return std::string();
}

std::string RangeProfiler::end(std::vector<double>& values) {
  if (!started_) return "the range profiler was not started for this launch";
  started_ = false;
  CUpti_RangeProfiler_Stop_Params stop{};
  stop.structSize = CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE;
  stop.pRangeProfilerObject = range_;
  PROFILER_CUPTI_OR_RETURN(cuptiRangeProfilerStop(&stop));
  if (!stop.isAllPassSubmitted) return "CUPTI did not replay every pass of the launch";
  CUpti_RangeProfiler_DecodeData_Params decode{};
  decode.structSize = CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE;
  decode.pRangeProfilerObject = range_;
  PROFILER_CUPTI_OR_RETURN(cuptiRangeProfilerDecodeData(&decode));
  CUpti_RangeProfiler_GetCounterDataInfo_Params info{};
  info.structSize = CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE;
  info.pCounterDataImage = counter_data_.data();
  info.counterDataImageSize = counter_data_.size();
  PROFILER_CUPTI_OR_RETURN(cuptiRangeProfilerGetCounterDataInfo(&info));
  if (info.numTotalRanges < 1) return "the launch left no profiled range (dropped: " +
                                     std::to_string(decode.numOfRangeDropped) + ")";
  values.assign(names_.size(), 0.0);
  CUpti_Profiler_Host_EvaluateToGpuValues_Params evaluate{};
  evaluate.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE;
  evaluate.pHostObject = host_;
  evaluate.pCounterDataImage = counter_data_.data();
  evaluate.counterDataImageSize = counter_data_.size();
  evaluate.rangeIndex = 0;
  evaluate.ppMetricNames = names_.data();
  evaluate.numMetrics = names_.size();
  evaluate.pMetricValues = values.data();
  PROFILER_CUPTI_OR_RETURN(cuptiProfilerHostEvaluateToGpuValues(&evaluate));
  return std::string();
}

void RangeProfiler::finish() {
  if (range_ != nullptr) {
    CUpti_RangeProfiler_Disable_Params disable{};
    disable.structSize = CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE;
    disable.pRangeProfilerObject = range_;
    cuptiRangeProfilerDisable(&disable);
    range_ = nullptr;
  }
  if (host_ != nullptr) {
    delete_host(host_);
    host_ = nullptr;
  }
}

}  // namespace profiler
