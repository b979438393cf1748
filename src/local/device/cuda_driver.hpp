// The few CUDA driver API calls the runtime API has no equivalent for (module loading with a JIT
// log, parameter layouts, launches of driver functions). They are fetched through the runtime
// (cudaGetDriverEntryPointByVersion) instead of linking libcuda, so atomr still starts, and
// answers "no GPU", on machines without an NVIDIA driver.
#pragma once

#include <cuda.h>

#include "atomr/common/result.hpp"

namespace atomr::local::detail {

struct cuda_driver {
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  decltype(&::cuModuleLoadDataEx) module_load_data_ex = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuFuncGetParamInfo) func_get_param_info = nullptr;
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor) occupancy_max_active_blocks = nullptr;
  CUresult (*launch_kernel_ex)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;

  // The entry points, fetched once per process; unavailable with the reason if any is missing.
  static result<const cuda_driver*> get();
};

error cu_failure(CUresult status, const char* call, const char* file, int line);

inline result<void> check_cu(CUresult status, const char* call, const char* file, int line) {
  if (status == CUDA_SUCCESS) return ok();
  return cu_failure(status, call, file, line);
}

}  // namespace atomr::local::detail

// ATOMR_CU_CHECK(call): ATOMR_CUDA_CHECK for a driver API call made through cuda_driver.
#define ATOMR_CU_CHECK(call) ::atomr::local::detail::check_cu((call), #call, __FILE__, __LINE__)
