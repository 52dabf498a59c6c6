#include "sass_metrics.h"

#include <cupti.h>
#include <cupti_profiler_target.h>
#include <cupti_sass_metrics.h>
#include <cupti_target.h>

#include <algorithm>
#include <map>

#include "dispatch.h"
#include "launch.h"
#include "log.h"
#include "profiler_init.h"

namespace profiler {

namespace {

std::string disable(CUcontext ctx) {
  CUpti_SassMetricsDisable_Params params{};
  params.structSize = CUpti_SassMetricsDisable_Params_STRUCT_SIZE;
  params.ctx = ctx;
  PROFILER_CUPTI_OR_RETURN(cuptiSassMetricsDisable(&params));
  return std::string();
}

}  // namespace

std::string SassMetrics::init(int device, const std::vector<std::string>& metrics) {
  std::string chip;
  const std::string initialized = init_profiler(device, chip);
  if (!initialized.empty()) return initialized;
  std::vector<CUpti_SassMetrics_Config> configs;
  for (const std::string& name : metrics) {
    CUpti_SassMetrics_GetProperties_Params properties{};
    properties.structSize = CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE;
    properties.pChipName = chip.c_str();
    properties.pMetricName = name.c_str();
    if (cuptiSassMetricsGetProperties(&properties) != CUPTI_SUCCESS) {
      unsupported_.push_back(name);
      continue;
    }
    CUpti_SassMetrics_Config config{};
    config.metricId = properties.metric.metricId;
    config.outputGranularity = CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU;
    configs.push_back(config);
    metrics_.push_back(name);
    ids_.push_back(properties.metric.metricId);
  }
  if (configs.empty()) return "the device supports none of the requested SASS metrics";
  CUpti_SassMetricsSetConfig_Params set{};
  set.structSize = CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE;
  set.deviceIndex = static_cast<uint32_t>(device);
  set.numOfMetricConfig = configs.size();
  set.pConfigs = configs.data();
  PROFILER_CUPTI_OR_RETURN(cuptiSassMetricsSetConfig(&set));
  return std::string();
}

std::string SassMetrics::begin(CUcontext ctx, CUfunction function) {
  const std::string loaded = load_function(function);
  if (!loaded.empty()) return loaded;
  CUpti_SassMetricsEnable_Params enable{};
  enable.structSize = CUpti_SassMetricsEnable_Params_STRUCT_SIZE;
  enable.ctx = ctx;
  enable.enableLazyPatching = 1;  // only what runs while enabled is patched: this launch's function
  PROFILER_CUPTI_OR_RETURN(cuptiSassMetricsEnable(&enable));
  enabled_ = true;
  return std::string();
}

std::string SassMetrics::end(CUcontext ctx, const std::string& function_name, SassResult& result) {
  if (!enabled_) return "SASS metrics were not enabled for this launch";
  enabled_ = false;
  const CUresult synced = drv::ctx_synchronize();
  if (synced != CUDA_SUCCESS) {
    disable(ctx);
    return drv::describe("cuCtxSynchronize after the patched launch", synced);
  }
  CUpti_SassMetricsGetDataProperties_Params properties{};
  properties.structSize = CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE;
  properties.ctx = ctx;
  CUptiResult r = cuptiSassMetricsGetDataProperties(&properties);
  if (r != CUPTI_SUCCESS) {
    disable(ctx);
    return cupti_failure("cuptiSassMetricsGetDataProperties", r);
  }
  if (properties.numOfPatchedInstructionRecords == 0) {
    const std::string problem = disable(ctx);
    return problem.empty() ? "no instruction of the launch was patched" : problem;
  }
  const size_t per_record = properties.numOfInstances * ids_.size();
  std::vector<CUpti_SassMetrics_Data> records(properties.numOfPatchedInstructionRecords);
  std::vector<CUpti_SassMetrics_InstanceValue> values(records.size() * per_record);
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].structSize = sizeof(CUpti_SassMetrics_Data);
    records[i].pInstanceValues = values.data() + i * per_record;
  }
  CUpti_SassMetricsFlushData_Params flush{};
  flush.structSize = CUpti_SassMetricsFlushData_Params_STRUCT_SIZE;
  flush.ctx = ctx;
  flush.numOfPatchedInstructionRecords = records.size();
  flush.numOfInstances = properties.numOfInstances;
  flush.pMetricsData = records.data();
  r = cuptiSassMetricsFlushData(&flush);
  const std::string disabled = disable(ctx);
  if (r != CUPTI_SUCCESS) return cupti_failure("cuptiSassMetricsFlushData", r);

  // A record holds some metrics of one instruction (memory instructions come in several records), each
  // value tagged with its metric's id; unused slots have id 0.
  std::map<uint32_t, std::vector<uint64_t>> by_pc;
  for (const CUpti_SassMetrics_Data& record : records) {
    if (record.functionName == nullptr || function_name != record.functionName) continue;
    result.cubin_crc = record.cubinCrc;
    std::vector<uint64_t>& counts = by_pc[record.pcOffset];
    counts.resize(ids_.size(), 0);
    for (size_t k = 0; k < per_record; ++k) {
      const CUpti_SassMetrics_InstanceValue& value = record.pInstanceValues[k];
      const auto at = std::find(ids_.begin(), ids_.end(), value.metricId);
      if (value.metricId != 0 && at != ids_.end()) counts[static_cast<size_t>(at - ids_.begin())] += value.value;
    }
  }
  if (by_pc.empty()) return "the patched launch recorded no instruction of " + function_name;
  for (auto& [pc, counts] : by_pc) result.instructions.push_back({pc, std::move(counts)});
  return disabled;
}

}  // namespace profiler
