#include <bit>

#include "arbiter/state.h"

namespace arbiter {

std::uint32_t IndexSet::Next(std::uint32_t from, std::uint32_t end) const {
  if (from >= end) return end;
  std::size_t w = from >> 6;
  std::uint64_t word = words_[w] & (~std::uint64_t{0} << (from & 63));
  const std::size_t last_word = (end - 1) >> 6;
  while (true) {
    if (word != 0) {
      const std::uint32_t i = static_cast<std::uint32_t>(w * 64 + std::countr_zero(word));
      return i < end ? i : end;
    }
    if (++w > last_word) return end;
    word = words_[w];
  }
}

}  // namespace arbiter
