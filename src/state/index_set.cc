#include <bit>

#include "arbiter/state.h"

namespace arbiter {

std::uint32_t IndexSet::Next(std::uint32_t from, std::uint32_t end) const {
  if (from >= end) return end;
  std::size_t w = from >> 6;
  std::uint64_t word = words_[w] & (~std::uint64_t{0} << (from & 63));
  if (word == 0) {
    // The next non-zero word after w, through the summary.
    const std::size_t last_word = (end - 1) >> 6;
    std::size_t next = w + 1;
    if (next > last_word) return end;
    std::size_t s = next >> 6;
    std::uint64_t bits = summary_[s] & (~std::uint64_t{0} << (next & 63));
    const std::size_t last_summary = last_word >> 6;
    while (bits == 0) {
      if (++s > last_summary) return end;
      bits = summary_[s];
    }
    w = s * 64 + static_cast<std::size_t>(std::countr_zero(bits));
    if (w > last_word) return end;
    word = words_[w];
  }
  const std::uint32_t i =
      static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(word)));
  return i < end ? i : end;
}

}  // namespace arbiter
