#include "cuda_driver.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "atomr/common/check.hpp"
#include "atomr/local/cuda_check.hpp"

namespace atomr::local::detail {
namespace {

// The driver ABI these entry points are declared with (CUDA 12.4 added cuFuncGetParamInfo).
constexpr unsigned k_driver_abi = 12040;

template <typename F>
result<void> fetch(const char* symbol, F& out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  ATOMR_TRY(ATOMR_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, k_driver_abi, cudaEnableDefault, &found)));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return error(errc::unavailable, std::string("the CUDA driver has no ") + symbol +
                                        (found == cudaDriverEntryPointVersionNotSufficent
                                             ? " at this version (a driver for CUDA 12.4 or newer is needed)"
                                             : ""));
  }
  out = reinterpret_cast<F>(fn);
  return ok();
}

result<cuda_driver> load() {
  cuda_driver d;
  ATOMR_TRY(fetch("cuGetErrorName", d.get_error_name));
  ATOMR_TRY(fetch("cuGetErrorString", d.get_error_string));
  ATOMR_TRY(fetch("cuModuleLoadDataEx", d.module_load_data_ex));
  ATOMR_TRY(fetch("cuModuleUnload", d.module_unload));
  ATOMR_TRY(fetch("cuModuleGetFunction", d.module_get_function));
  ATOMR_TRY(fetch("cuFuncGetParamInfo", d.func_get_param_info));
  ATOMR_TRY(fetch("cuOccupancyMaxActiveBlocksPerMultiprocessor", d.occupancy_max_active_blocks));
  ATOMR_TRY(fetch("cuLaunchKernelEx", d.launch_kernel_ex));
  return d;
}

}  // namespace

result<const cuda_driver*> cuda_driver::get() {
  static const result<cuda_driver> driver = load();
  if (!driver) return driver.error_value();
  return &driver.value();
}

error cu_failure(CUresult status, const char* call, const char* file, int line) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (auto d = cuda_driver::get()) {
    (*d)->get_error_name(status, &name);
    (*d)->get_error_string(status, &text);
  }
  std::string message = text != nullptr ? text : "unknown error";
  message += " (";
  message += name != nullptr ? name : "CUresult";
  message += '=';
  message += std::to_string(static_cast<int>(status));
  message += ')';
  const errc code = status == CUDA_ERROR_OUT_OF_MEMORY ? errc::out_of_memory : errc::cuda;
  return ::atomr::detail::failed_call(code, call, message, file, line);
}

}  // namespace atomr::local::detail
