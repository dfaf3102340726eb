// Quantity parsers: exact decimals with a unit suffix, scaled to an integer base unit with
// integer arithmetic only, so that "0.5" GPUs is exactly 500 milli-GPU.

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "job/limits.h"

namespace arbiter::config {
namespace {

// A base unit per suffix: one of the suffix is num/den base units.
struct Unit {
  std::string_view suffix;
  std::int64_t num;
  std::int64_t den;
};

struct Kind {
  const char* what;       // "GPU count", for "invalid GPU count 'x'"
  const char* examples;   // "2, 0.5 or 500m"
  const char* precision;  // "1 milli-GPU", for "finer than 1 milli-GPU"
};

// 128-bit intermediates: a mantissa of up to 18 digits times a unit factor below 2^60 never
// overflows. __extension__ keeps -Wpedantic quiet about the GCC/Clang type.
__extension__ using Int128 = __int128;

// "-12.500" -> mantissa 12500, scale 3, negative.
struct Decimal {
  bool negative = false;
  Int128 mantissa = 0;
  int scale = 0;  // digits after the point
  std::string_view suffix;
};

constexpr int kMaxDigits = 18;

std::optional<Decimal> SplitDecimal(std::string_view text, bool* too_long) {
  Decimal d;
  std::size_t i = 0;
  if (i < text.size() && text[i] == '-') {
    d.negative = true;
    ++i;
  }
  int digits = 0;
  bool point = false;
  std::size_t start = i;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      d.mantissa = d.mantissa * 10 + (c - '0');
      if (d.mantissa != 0 || point) ++digits;
      if (point) ++d.scale;
      if (digits > kMaxDigits) {
        *too_long = true;
        return std::nullopt;
      }
    } else if (c == '.' && !point && i > start) {
      point = true;
    } else {
      break;
    }
  }
  // At least one digit, and a point must be followed by a digit.
  if (i == start || text[i - 1] == '.') return std::nullopt;
  d.suffix = text.substr(i);
  return d;
}

template <std::size_t N>
Result<std::int64_t> ParseScaled(std::string_view text, std::string_view field, const Kind& kind,
                                 const std::array<Unit, N>& units,
                                 std::string_view unit_hint = {}) {
  auto invalid = [&] {
    return Status::InvalidArgument(
        fmt::format("invalid {} '{}' (expected e.g. {})", kind.what, text, kind.examples),
        std::string(field));
  };
  bool too_long = false;
  std::optional<Decimal> d = SplitDecimal(text, &too_long);
  if (too_long)
    return Status::InvalidArgument(fmt::format("too many digits, got {}", text),
                                   std::string(field));
  if (!d) return invalid();
  const Unit* unit = nullptr;
  for (const Unit& u : units) {
    if (u.suffix == d->suffix) unit = &u;
  }
  if (unit == nullptr) {
    if (!unit_hint.empty() && !d->suffix.empty()) {
      return Status::InvalidArgument(
          fmt::format("unknown unit '{}' in '{}' ({})", d->suffix, text, unit_hint),
          std::string(field));
    }
    return invalid();
  }
  if (d->negative && d->mantissa != 0) {
    return Status::InvalidArgument(fmt::format("must not be negative, got {}", text),
                                   std::string(field));
  }
  Int128 den = unit->den;
  for (int k = 0; k < d->scale; ++k) den *= 10;
  Int128 num = d->mantissa * unit->num;
  if (num % den != 0) {
    return Status::InvalidArgument(fmt::format("finer than {}, got {}", kind.precision, text),
                                   std::string(field));
  }
  Int128 value = num / den;
  if (value > std::numeric_limits<std::int64_t>::max()) {
    return Status::InvalidArgument(fmt::format("too large, got {}", text), std::string(field));
  }
  return static_cast<std::int64_t>(value);
}

constexpr std::array<Unit, 2> kMilliUnits = {{{"", 1000, 1}, {"m", 1, 1}}};

// In MiB.
constexpr std::int64_t kGi = 1024;
constexpr std::int64_t kTi = 1024 * kGi;
constexpr std::int64_t kPi = 1024 * kTi;
constexpr std::array<Unit, 6> kMemoryUnits = {{
    {"", 1, 1},
    {"Ki", 1, 1024},
    {"Mi", 1, 1},
    {"Gi", kGi, 1},
    {"Ti", kTi, 1},
    {"Pi", kPi, 1},
}};

constexpr std::int64_t kSecond = kMillisPerSecond;
constexpr std::array<Unit, 6> kDurationUnits = {{
    {"", kSecond, 1},
    {"ms", 1, 1},
    {"s", kSecond, 1},
    {"m", 60 * kSecond, 1},
    {"h", 3600 * kSecond, 1},
    {"d", 24 * 3600 * kSecond, 1},
}};

}  // namespace

Result<MilliGpu> ParseGpus(std::string_view text, std::string_view field) {
  static constexpr Kind kKind{"GPU count", "2, 0.5 or 500m", "1 milli-GPU (0.001)"};
  Result<std::int64_t> v = ParseScaled(text, field, kKind, kMilliUnits);
  if (!v.ok()) return v.status();
  return MilliGpu(*v);
}

Result<MilliGpu> ParseQuotaGpus(std::string_view text, std::string_view field) {
  Result<MilliGpu> g = ParseGpus(text, field);
  if (g.ok() && g->value() > limits::kMaxQuotaMilli) {
    return Status::InvalidArgument(
        fmt::format("must be at most {} GPUs, got {}", limits::kMaxQuotaMilli / kMilliPerGpu, text),
        std::string(field));
  }
  return g;
}

Result<MilliCpu> ParseCpu(std::string_view text, std::string_view field) {
  static constexpr Kind kKind{"CPU amount", "16, 0.25 or 250m", "1 milli-core (0.001)"};
  Result<std::int64_t> v = ParseScaled(text, field, kKind, kMilliUnits);
  if (!v.ok()) return v.status();
  return MilliCpu(*v);
}

Result<std::int64_t> ParseMiB(std::string_view text, std::string_view field) {
  static constexpr Kind kKind{"memory size", "81920 (MiB), 512Mi, 80Gi or 1Ti", "1 MiB"};
  return ParseScaled(text, field, kKind, kMemoryUnits,
                     "use a binary unit: Ki, Mi, Gi, Ti or Pi; a bare number is MiB");
}

Result<Millis> ParseDuration(std::string_view text, std::string_view field) {
  static constexpr Kind kKind{"duration", "90 (seconds), 500ms, 30s, 15m, 4h, 7d or 1d12h", "1 ms"};
  constexpr std::string_view kHint = "use ms, s, m, h or d; a bare number is seconds";
  // A compound duration ("1d12h30m") is a sum of parts, each with its unit, largest unit first.
  std::vector<std::string_view> parts;
  std::size_t begin = 0;
  for (std::size_t i = 1; i < text.size(); ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(text[i])) != 0;
    const bool after_letter = std::isalpha(static_cast<unsigned char>(text[i - 1])) != 0;
    if (digit && after_letter) {
      parts.push_back(text.substr(begin, i - begin));
      begin = i;
    }
  }
  parts.push_back(text.substr(begin));
  if (parts.size() == 1) return ParseScaled(text, field, kKind, kDurationUnits, kHint);
  Millis total = 0;
  Millis previous_unit = std::numeric_limits<Millis>::max();
  for (std::string_view part : parts) {
    Result<std::int64_t> v = ParseScaled(part, field, kKind, kDurationUnits, kHint);
    if (!v.ok()) return v.status();
    Millis unit = 0;
    for (const Unit& u : kDurationUnits) {
      if (!u.suffix.empty() && part.ends_with(u.suffix) &&
          !std::isalpha(static_cast<unsigned char>(part[part.size() - u.suffix.size() - 1]))) {
        unit = static_cast<Millis>(u.num / u.den);
      }
    }
    if (unit == 0) {
      return Status::InvalidArgument(
          fmt::format("each part of a compound duration needs a unit, got '{}' in '{}'", part,
                      text),
          std::string(field));
    }
    if (unit >= previous_unit) {
      return Status::InvalidArgument(
          fmt::format(
              "give the parts of a compound duration largest unit first, once each, got '{}'",
              text),
          std::string(field));
    }
    previous_unit = unit;
    if (*v > std::numeric_limits<Millis>::max() - total) {
      return Status::InvalidArgument(fmt::format("too large, got {}", text), std::string(field));
    }
    total += *v;
  }
  return total;
}

std::string DurationText(Millis d) {
  if (d < 0) return "-" + DurationText(-d);
  if (d == 0) return "0s";
  std::string out;
  constexpr std::array<std::pair<std::string_view, Millis>, 5> kParts = {{
      {"d", 24 * 3600 * kSecond},
      {"h", 3600 * kSecond},
      {"m", 60 * kSecond},
      {"s", kSecond},
      {"ms", 1},
  }};
  for (const auto& [suffix, unit] : kParts) {
    if (d >= unit) {
      out += std::to_string(d / unit);
      out += suffix;
      d %= unit;
    }
  }
  return out;
}

}  // namespace arbiter::config
