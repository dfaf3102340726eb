#include <bit>

#include "core/state/cluster_state.h"

namespace arbiter {

std::size_t IndexSet::NextWord(std::size_t w, std::size_t last) const {
  if (w > last) return last + 1;
  std::size_t s = w >> 6;
  std::uint64_t bits = summary_[s] & (~std::uint64_t{0} << (w & 63));
  if (bits == 0) {
    // The next non-zero summary word after s, through the top level.
    const std::size_t last_summary = last >> 6;
    if (++s > last_summary) return last + 1;
    std::size_t t = s >> 6;
    std::uint64_t top = top_[t] & (~std::uint64_t{0} << (s & 63));
    while (top == 0) {
      if (++t > last_summary >> 6) return last + 1;
      top = top_[t];
    }
    s = t * 64 + static_cast<std::size_t>(std::countr_zero(top));
    if (s > last_summary) return last + 1;
    bits = summary_[s];
  }
  return s * 64 + static_cast<std::size_t>(std::countr_zero(bits));
}

std::uint32_t IndexSet::Next(std::uint32_t from, std::uint32_t end) const {
  if (from >= end || size_ == 0) return end;
  std::size_t w = from >> 6;
  std::uint64_t word = words_[w] & (~std::uint64_t{0} << (from & 63));
  if (word == 0) {
    const std::size_t last_word = (end - 1) >> 6;
    w = NextWord(w + 1, last_word);
    if (w > last_word) return end;
    word = words_[w];
  }
  const std::uint32_t i =
      static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(word)));
  return i < end ? i : end;
}

}  // namespace arbiter
