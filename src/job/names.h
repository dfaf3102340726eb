// Names the cluster does not have: the message every reader of jobs (and of the cluster file)
// gives for them, with the closest known name when it is a likely typo.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter::job {

// The candidate closest to `name` by edit distance (ignoring case) when it is close enough to be
// a likely typo: about one edit per three characters, at least one, at most three.
std::optional<std::string> Suggest(std::string_view name, const std::vector<std::string>& known);
// `unknown WHAT 'name' (known: a, b, c); did you mean 'b'?`, the list capped at 24 names.
std::string UnknownName(std::string_view what, std::string_view name,
                        const std::vector<std::string>& known,
                        std::string_view list_label = "known");

}  // namespace arbiter::job
