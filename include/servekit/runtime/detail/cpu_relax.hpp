#pragma once
/// \file
/// cpu_relax: the pause hint for spin-wait loops.

namespace servekit::detail {

/// Tells the CPU this is a spin-wait iteration (x86 `pause`, Arm `yield`): it saves power and
/// frees the core's pipeline for its sibling hyper-thread. A no-op elsewhere.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#endif
}

} // namespace servekit::detail
