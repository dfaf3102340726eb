#include "arbiter/model.h"

#include <algorithm>
#include <string>

namespace arbiter {

bool Toleration::Tolerates(const Taint& taint) const {
  if (effect && *effect != taint.effect) return false;
  if (key.empty()) return op == Op::kExists;
  if (key != taint.key) return false;
  return op == Op::kExists || value == taint.value;
}

int Topology::LevelIndex(const std::string& name) const {
  auto it = std::find(levels.begin(), levels.end(), name);
  return it == levels.end() ? -1 : static_cast<int>(it - levels.begin());
}

std::int64_t Job::task_count() const {
  std::int64_t n = 0;
  for (const TaskGroup& g : groups) n += g.count;
  return n;
}

MilliGpu Job::total_gpu() const {
  MilliGpu total{0};
  for (const TaskGroup& g : groups) total += g.request.gpu * g.count;
  return total;
}

}  // namespace arbiter

namespace arbiter {
namespace {

std::string Two(std::int64_t v) { return (v < 10 ? "0" : "") + std::to_string(v); }

// Seconds with the milliseconds after a point when there are any: "04", "04.250".
std::string SecondsPart(std::int64_t s, std::int64_t ms, bool pad) {
  std::string out = pad ? Two(s) : std::to_string(s);
  if (ms > 0) {
    const std::string frac = std::to_string(1000 + ms).substr(1);
    out += "." + frac;
  }
  return out;
}

}  // namespace

std::string FormatDuration(Millis d) {
  if (d < 0) return "-" + FormatDuration(-d);
  const std::int64_t ms = d % 1000;
  std::int64_t s = d / 1000;
  const std::int64_t days = s / 86400;
  const std::int64_t hours = s / 3600 % 24;
  const std::int64_t minutes = s / 60 % 60;
  s %= 60;
  if (days > 0)
    return std::to_string(days) + "d " + Two(hours) + "h" + Two(minutes) + "m" +
           SecondsPart(s, ms, true) + "s";
  if (hours > 0)
    return std::to_string(hours) + "h" + Two(minutes) + "m" + SecondsPart(s, ms, true) + "s";
  if (minutes > 0) return std::to_string(minutes) + "m" + SecondsPart(s, ms, true) + "s";
  return SecondsPart(s, ms, false) + "s";
}

std::string FormatTime(Millis t, TimeStyle style) {
  if (style == TimeStyle::kElapsed) return FormatDuration(t);
  // The civil date of a day count since 1970-01-01 (proleptic Gregorian, eras of 400 years).
  const std::int64_t ms = ((t % 1000) + 1000) % 1000;
  const std::int64_t total_s = (t - ms) / 1000;
  std::int64_t days = total_s / 86400;
  std::int64_t sod = total_s % 86400;
  if (sod < 0) {
    sod += 86400;
    --days;
  }
  const std::int64_t z = days + 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  const std::int64_t day = doy - (153 * mp + 2) / 5 + 1;
  const std::int64_t month = mp < 10 ? mp + 3 : mp - 9;
  const std::int64_t year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  std::string y = std::to_string(year);
  if (year >= 0 && y.size() < 4) y = std::string(4 - y.size(), '0') + y;
  return y + "-" + Two(month) + "-" + Two(day) + "T" + Two(sod / 3600) + ":" + Two(sod / 60 % 60) +
         ":" + SecondsPart(sod % 60, ms, true) + "Z";
}

}  // namespace arbiter
