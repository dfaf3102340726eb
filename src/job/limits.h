// The one set of limits on what a job may ask for, whoever reads it: jobs files and `arbiter
// submit -f` (YAML), the server's API (JSON), scenarios' job templates and the trace readers.
// job::ValidateJobSpec checks a job against them; the trace readers check each row's values
// against them. They keep a typo or a hostile request from exhausting memory or overflowing a
// sum; they are not capacity checks (the engine says when a job can never fit). To tighten a
// limit, change it here: every reader follows.
//
// Header-only (constants and small checks without fmt) so that every library may use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "arbiter/model.h"
#include "arbiter/quantity.h"
#include "arbiter/status.h"
#include "core/state/cluster_state.h"

namespace arbiter::limits {

// Texts: names (job, group, queue, class, GPU type, topology level, user), label keys and values,
// toleration keys and values. Bytes of UTF-8 (a Kubernetes name's limit).
inline constexpr std::size_t kMaxNameBytes = 253;
// A Kubernetes label value, and the name part of a label key.
inline constexpr std::size_t kMaxLabelPartBytes = 63;
// Label maps (labels, node_selector, an affinity term's match) and tolerations.
inline constexpr std::size_t kMaxLabels = 64;
inline constexpr std::size_t kMaxTolerations = 64;
inline constexpr std::size_t kMaxAffinityTerms = 16;
// Task groups of a job, and tasks: of one group and of the whole job (a gang).
inline constexpr std::size_t kMaxGroups = 64;
inline constexpr std::int64_t kMaxTasksPerJob = 1'000'000;
// A jobs file's `replicas` (copies of one entry).
inline constexpr std::int64_t kMaxReplicas = 1 << 16;
// What one task asks: at most the devices a node may have (a task runs on one node), CPU and
// memory (MiB, per task; GPU memory per device).
inline constexpr std::int64_t kMaxGpuMilliPerTask =
    static_cast<std::int64_t>(kMaxDevicesPerNode) * kMilliPerGpu;
inline constexpr std::int64_t kMaxCpuMilliPerTask = 1'000'000'000'000;
inline constexpr std::int64_t kMaxMemoryMiB = 1'000'000'000'000;
// A trace row's GPUs before it is split into tasks (whole GPUs of the whole job).
inline constexpr std::int64_t kMaxGpusPerJob = 1'000'000;
// Durations (runtime estimate, checkpoint interval, restart overhead, a trace's run time): a
// year in milliseconds, so that a time plus a duration never overflows.
inline constexpr Millis kMaxDuration = 366LL * 24 * 3600 * 1000;
// Times (a submit time: Unix milliseconds, or milliseconds from a trace's start): about 31,700
// years.
inline constexpr Millis kMaxTime = 1'000'000'000'000'000;
// What a task runs: argv elements, environment variables, and all their bytes together (with the
// shell command).
inline constexpr std::size_t kMaxArgs = 4096;
inline constexpr std::size_t kMaxEnv = 1024;
inline constexpr std::size_t kMaxCommandBytes = 256 * 1024;
inline constexpr std::int32_t kMaxRetries = 1'000'000;
// A reason an operator gives (cordon, drain): one line of text.
inline constexpr std::size_t kMaxReasonBytes = 1024;
// A queue's quota (nominal, borrowing and lending limits, max) in milli-GPU: a billion GPUs, so
// that the sums over a queue tree never overflow.
inline constexpr std::int64_t kMaxQuotaMilli = 1'000'000'000'000;
// Nesting of a JSON body (objects and arrays within each other): a job spec needs 5. Deeper
// bodies are refused before they are parsed (a parsed document is walked recursively).
inline constexpr std::size_t kMaxJsonDepth = 32;

// The byte offset of the first bracket of a JSON text nested deeper than kMaxJsonDepth, counted
// without parsing (brackets inside strings do not count), or npos when it is within the limit.
inline std::size_t FindTooDeep(std::string_view text) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return i;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

// The name a task group gets when it has none: "main" when it is the job's only group, else
// "group-K" (its index).
inline std::string DefaultGroupName(std::size_t index, std::size_t groups) {
  return groups == 1 ? std::string("main") : "group-" + std::to_string(index);
}

// Milli-GPU as GPUs: "2", "1.5", "0.25".
inline std::string FormatGpus(std::int64_t milli) {
  std::string out = std::to_string(milli / kMilliPerGpu);
  if (std::int64_t frac = milli % kMilliPerGpu; frac != 0) {
    std::string digits = std::to_string(kMilliPerGpu + (frac < 0 ? -frac : frac)).substr(1);
    while (digits.back() == '0') digits.pop_back();
    out += "." + digits;
  }
  return out;
}

// Milli-GPU with its noun: "1 GPU", "2 GPUs", "0.5 GPUs".
inline std::string FormatGpuCount(std::int64_t milli) {
  return FormatGpus(milli) + (milli == kMilliPerGpu ? " GPU" : " GPUs");
}

// Checks of one value, shared by the validator and the trace readers. Each returns an
// invalid-argument Status naming `field`.

// A count in [min, max].
inline Status CheckCount(std::string_view field, std::int64_t value, std::int64_t min,
                         std::int64_t max) {
  if (value < min) {
    return Status::InvalidArgument(
        (min == 0 ? std::string("must not be negative, got ")
                  : "must be at least " + std::to_string(min) + ", got ") +
            std::to_string(value),
        std::string(field));
  }
  if (value > max) {
    return Status::InvalidArgument(
        "must be at most " + std::to_string(max) + ", got " + std::to_string(value),
        std::string(field));
  }
  return Status::Ok();
}

// A duration in milliseconds: 0 to kMaxDuration (a year).
inline Status CheckDuration(std::string_view field, Millis value) {
  if (value > kMaxDuration) {
    return Status::InvalidArgument("must be at most a year (" + std::to_string(kMaxDuration) +
                                       " ms), got " + std::to_string(value),
                                   std::string(field));
  }
  return CheckCount(field, value, 0, kMaxDuration);
}

// A time in milliseconds: 0 to kMaxTime.
inline Status CheckTime(std::string_view field, Millis value) {
  return CheckCount(field, value, 0, kMaxTime);
}

namespace internal {
// The code point of the UTF-8 sequence at text[i] and its length in bytes, or a length of 0 when
// no well-formed multi-byte sequence starts there.
struct CodePoint {
  std::uint32_t code = 0;
  std::size_t size = 0;
};
inline CodePoint DecodeAt(std::string_view text, std::size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  const std::size_t size = c >= 0xc2 && c <= 0xdf   ? 2
                           : c >= 0xe0 && c <= 0xef ? 3
                           : c >= 0xf0 && c <= 0xf4 ? 4
                                                    : 0;
  if (size == 0 || i + size > text.size()) return {};
  std::uint32_t code = c & (size == 2 ? 0x1fu : size == 3 ? 0x0fu : 0x07u);
  for (std::size_t k = 1; k < size; ++k) {
    const auto d = static_cast<unsigned char>(text[i + k]);
    if ((d & 0xc0u) != 0x80u) return {};
    code = (code << 6) | (d & 0x3fu);
  }
  return {code, size};
}
// What shows as nothing: Unicode's format characters (general category Cf: bidirectional marks,
// embeddings, overrides and isolates, zero-width characters, the byte order mark, invisible
// operators, tags ...), the other default-ignorable code points (the combining grapheme joiner,
// the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0, the Khmer inherent vowels, the Mongolian
// variation selectors, the variation selectors U+FE00..U+FE0F and U+E0100..U+E01EF, the
// unassigned U+FFF0..U+FFF8 and U+E0000..U+E0FFF), the line and paragraph separators (Zl, Zp)
// and the C1 controls: sorted, inclusive ranges.
inline constexpr std::uint32_t kInvisible[][2] = {
    {0x0080, 0x009f},   {0x00ad, 0x00ad},   {0x034f, 0x034f},   {0x0600, 0x0605},
    {0x061c, 0x061c},   {0x06dd, 0x06dd},   {0x070f, 0x070f},   {0x0890, 0x0891},
    {0x08e2, 0x08e2},   {0x115f, 0x1160},   {0x17b4, 0x17b5},   {0x180b, 0x180f},
    {0x200b, 0x200f},   {0x2028, 0x202e},   {0x2060, 0x206f},   {0x3164, 0x3164},
    {0xfe00, 0xfe0f},   {0xfeff, 0xfeff},   {0xffa0, 0xffa0},   {0xfff0, 0xfffb},
    {0x110bd, 0x110bd}, {0x110cd, 0x110cd}, {0x13430, 0x1343f}, {0x1bca0, 0x1bca3},
    {0x1d173, 0x1d17a}, {0xe0000, 0xe0fff}};
inline bool Invisible(std::uint32_t code) {
  for (const auto& range : kInvisible) {
    if (code < range[0]) return false;
    if (code <= range[1]) return true;
  }
  return false;
}
}  // namespace internal

// The first character of `text` that a terminal or a log would not show as itself: a control
// character (C0, DEL, C1: U+0080..U+009F) other than those `allowed`, or a Unicode format
// character that reorders or hides text (bidirectional marks, embeddings, overrides and isolates,
// zero-width characters, the byte order mark, tags: category Cf), another character that shows as
// nothing (Hangul fillers, variation selectors: Unicode's default-ignorable code points) or one
// that breaks a line (U+2028, U+2029). Its offset in bytes, or npos. `text` is UTF-8 (checked
// elsewhere); a malformed sequence is passed over here.
inline std::size_t FindUnprintable(std::string_view text, std::string_view allowed = {}) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      if (allowed.find(static_cast<char>(c)) == std::string_view::npos) return i;
      continue;
    }
    if (c < 0x80) continue;
    const internal::CodePoint cp = internal::DecodeAt(text, i);
    if (cp.size == 0) continue;
    if (internal::Invisible(cp.code)) return i;
    i += cp.size - 1;
  }
  return std::string_view::npos;
}

// `text` with what FindUnprintable finds (but `allowed`) written as escapes ("\x1b", "\u202e",
// "\U000e0041"), so that printing it cannot move the cursor, recolour a terminal or reorder a
// line.
inline std::string Printable(std::string_view text, std::string_view allowed = {}) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const std::size_t at = FindUnprintable(text, allowed);
    out.append(text.substr(0, at == std::string_view::npos ? text.size() : at));
    if (at == std::string_view::npos) break;
    static constexpr char kHex[] = "0123456789abcdef";
    internal::CodePoint cp = internal::DecodeAt(text, at);
    if (cp.size == 0) cp = {static_cast<unsigned char>(text[at]), 1};  // C0 or DEL
    const int digits = cp.code < 0x100 ? 2 : cp.code < 0x10000 ? 4 : 8;
    out += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
    for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4) out += kHex[(cp.code >> shift) & 15];
    text.remove_prefix(at + cp.size);
  }
  return out;
}

// A text shown to people: at most `max_bytes`, nothing FindUnprintable finds (but `allowed`).
inline Status CheckText(std::string_view field, std::string_view text, std::size_t max_bytes,
                        std::string_view allowed = {}) {
  if (text.size() > max_bytes) {
    return Status::InvalidArgument("must be at most " + std::to_string(max_bytes) +
                                       " bytes long, got " + std::to_string(text.size()),
                                   std::string(field));
  }
  if (std::size_t at = FindUnprintable(text, allowed); at != std::string_view::npos) {
    return Status::InvalidArgument(
        "must not contain control or invisible formatting characters (one at byte " +
            std::to_string(at) + ")",
        std::string(field));
  }
  return Status::Ok();
}

// A name: at most kMaxNameBytes, no control or formatting characters (CheckText); `required`: not
// empty either. Names that refer to something configured (a queue, a class, a GPU type) and those
// a trace gives are checked this far; the names the API creates go further (CheckObjectName).
inline Status CheckName(std::string_view field, std::string_view text, bool required) {
  if (required && text.empty())
    return Status::InvalidArgument("must not be empty", std::string(field));
  return CheckText(field, text, kMaxNameBytes);
}

namespace internal {
inline bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}
inline bool Alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
// [A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?
inline bool NameSyntax(std::string_view s) {
  if (s.empty() || !Alnum(s.front()) || !Alnum(s.back())) return false;
  for (char c : s)
    if (!NameChar(c)) return false;
  return true;
}
}  // namespace internal

// A name the API creates (a job's, a task group's): 1 to kMaxNameBytes of letters, digits, '-',
// '_' and '.', beginning and ending with a letter or digit. Kubernetes' object names, with upper
// case and '_' allowed as well (Slurm's job names and trace ids have them).
inline Status CheckObjectName(std::string_view field, std::string_view text) {
  if (Status s = CheckName(field, text, true); !s.ok()) return s;
  if (!internal::NameSyntax(text)) {
    return Status::InvalidArgument(
        "must be letters, digits, '-', '_' and '.', beginning and ending with a letter or digit, "
        "got '" +
            std::string(text) + "'",
        std::string(field));
  }
  return Status::Ok();
}

// A label key as Kubernetes has it: an optional prefix (a DNS subdomain: lower-case letters,
// digits, '-' and '.', at most 253 bytes) and '/', then a name of at most 63 bytes
// ([A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?).
inline Status CheckLabelKey(std::string_view field, std::string_view key) {
  if (Status s = CheckName(field, key, true); !s.ok()) return s;
  std::string_view name = key;
  bool ok = true;
  if (std::size_t slash = key.find('/'); slash != std::string_view::npos) {
    const std::string_view prefix = key.substr(0, slash);
    name = key.substr(slash + 1);
    ok = !prefix.empty() && prefix.size() <= kMaxNameBytes && internal::Alnum(prefix.front()) &&
         internal::Alnum(prefix.back());
    for (char c : prefix)
      ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.');
  }
  ok = ok && name.size() <= kMaxLabelPartBytes && internal::NameSyntax(name);
  if (!ok) {
    return Status::InvalidArgument(
        "a label key is [PREFIX/]NAME: NAME of at most 63 letters, digits, '-', '_' and '.' "
        "beginning and ending with a letter or digit, PREFIX a lower-case DNS name; got '" +
            std::string(key) + "'",
        std::string(field));
  }
  return Status::Ok();
}

// A label value as Kubernetes has it: empty, or at most 63 letters, digits, '-', '_' and '.',
// beginning and ending with a letter or digit.
inline Status CheckLabelValue(std::string_view field, std::string_view value) {
  if (value.empty()) return Status::Ok();
  if (Status s = CheckName(field, value, false); !s.ok()) return s;
  if (value.size() > kMaxLabelPartBytes || !internal::NameSyntax(value)) {
    return Status::InvalidArgument(
        "a label value is empty or at most 63 letters, digits, '-', '_' and '.', beginning and "
        "ending with a letter or digit; got '" +
            std::string(value) + "'",
        std::string(field));
  }
  return Status::Ok();
}

// A task's GPUs in milli-GPU: 0, a share of one device (1..999) or whole devices, at most
// kMaxGpuMilliPerTask.
inline Status CheckTaskGpus(std::string_view field, std::int64_t milli) {
  if (Status s = CheckCount(field, milli, 0, kMaxGpuMilliPerTask); !s.ok()) return s;
  if (milli > kMilliPerGpu && milli % kMilliPerGpu != 0) {
    return Status::InvalidArgument(
        "above 1 GPU must be a whole number (a task takes a share of one GPU or whole GPUs), "
        "got " +
            FormatGpus(milli) + " GPUs",
        std::string(field));
  }
  return Status::Ok();
}

}  // namespace arbiter::limits
