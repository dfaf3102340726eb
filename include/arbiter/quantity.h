// Integer quantities in strong types. Capacity arithmetic never uses floating point: a GPU is
// 1000 milli-GPU, CPU is counted in milli-cores, memory in MiB.
#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace arbiter {

template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(std::int64_t value) : value_(value) {}

  constexpr std::int64_t value() const { return value_; }

  constexpr Quantity& operator+=(Quantity other) {
    value_ += other.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity other) {
    value_ -= other.value_;
    return *this;
  }
  friend constexpr Quantity operator+(Quantity a, Quantity b) {
    return Quantity(a.value_ + b.value_);
  }
  friend constexpr Quantity operator-(Quantity a, Quantity b) {
    return Quantity(a.value_ - b.value_);
  }
  friend constexpr Quantity operator*(Quantity a, std::int64_t n) { return Quantity(a.value_ * n); }
  friend constexpr Quantity operator*(std::int64_t n, Quantity a) { return Quantity(a.value_ * n); }
  friend constexpr auto operator<=>(Quantity, Quantity) = default;

 private:
  std::int64_t value_ = 0;
};

struct MilliGpuTag {};
struct GpuMemMiBTag {};
struct MilliCpuTag {};
struct MemMiBTag {};

// 1000 = one whole GPU device. A task asks either for a share of one device (1..999) or for a
// number of whole devices (a multiple of 1000).
using MilliGpu = Quantity<MilliGpuTag>;
using GpuMemMiB = Quantity<GpuMemMiBTag>;
using MilliCpu = Quantity<MilliCpuTag>;
using MemMiB = Quantity<MemMiBTag>;

inline constexpr std::int64_t kMilliPerGpu = 1000;
inline constexpr MilliGpu kWholeGpu{kMilliPerGpu};

// Time is counted in milliseconds since the driver's epoch (virtual in the simulator, Unix time
// in the server). The engine never reads a clock: time is always passed in.
using Millis = std::int64_t;
inline constexpr Millis kMillisPerSecond = 1000;

// How a moment prints, everywhere it is printed: the simulator's moments as the time elapsed since
// its start (`1d 02h03m04s`), the server's as UTC calendar time (`2026-12-02T08:40:00Z`). One
// format per driver, never raw epoch seconds.
enum class TimeStyle : std::uint8_t { kElapsed, kCalendar };
// A duration: `4s`, `3m04s`, `2h03m04s`, `1d 02h03m04s` (milliseconds, when there are any, as
// `4.250s`); negative durations start with `-`.
std::string FormatDuration(Millis d);
// A moment: FormatDuration(t) when elapsed; ISO 8601 UTC (with milliseconds when there are any)
// when calendar.
std::string FormatTime(Millis t, TimeStyle style);

}  // namespace arbiter
