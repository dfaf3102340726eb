// Status and Result: how errors cross the library's boundaries. Expected failures are values;
// exceptions are not thrown across this API.
//
// A Status that is not ok carries a code (what kind of failure, so that a caller can decide what to
// do without reading the message), the path of the field it concerns when it concerns one
// ("groups[0].gpu", "queues[2].max"; empty otherwise) and a message for people. Only the HTTP layer
// maps codes to HTTP statuses; nothing branches on the message's text.
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace arbiter {

enum class StatusCode : std::uint8_t {
  kOk,
  kInvalidArgument,    // the input is malformed or out of range: the caller must change it
  kNotFound,           // what the input names does not exist
  kPermissionDenied,   // the caller may not do this
  kConflict,           // the input is valid but contradicts the current state (already exists...)
  kUnavailable,        // a dependency failed or is busy: the same call may succeed later
  kInternal,           // a broken invariant or a failure the caller cannot act on
  kUnauthenticated,    // the caller did not say who it is, or not in a way that can be believed
  kResourceExhausted,  // the caller holds its share of something (connections, watchers) already
};

// "ok", "invalid argument", "not found", "permission denied", "conflict", "unavailable",
// "internal", "unauthenticated", "resource exhausted".
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }
  // `field`: the path of the field the error concerns, or empty.
  static Status InvalidArgument(std::string message, std::string field = {}) {
    return Status(StatusCode::kInvalidArgument, std::move(field), std::move(message));
  }
  static Status NotFound(std::string message, std::string field = {}) {
    return Status(StatusCode::kNotFound, std::move(field), std::move(message));
  }
  static Status PermissionDenied(std::string message, std::string field = {}) {
    return Status(StatusCode::kPermissionDenied, std::move(field), std::move(message));
  }
  static Status Conflict(std::string message, std::string field = {}) {
    return Status(StatusCode::kConflict, std::move(field), std::move(message));
  }
  static Status Unavailable(std::string message) {
    return Status(StatusCode::kUnavailable, {}, std::move(message));
  }
  static Status Internal(std::string message) {
    return Status(StatusCode::kInternal, {}, std::move(message));
  }
  static Status FromCode(StatusCode code, std::string message, std::string field = {}) {
    assert(code != StatusCode::kOk);
    return Status(code, std::move(field), std::move(message));
  }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // The path of the field concerned ("" when ok or when the error concerns no one field).
  const std::string& field() const { return rep_ ? rep_->field : Empty(); }
  // What went wrong, without the field; "" when ok().
  const std::string& detail() const { return rep_ ? rep_->detail : Empty(); }
  // For people: "field: detail", or the detail alone when there is no field; "" when ok().
  const std::string& message() const { return rep_ ? rep_->message : Empty(); }

  // The same error seen from an enclosing object: `parent` goes before the field path
  // ("groups[0]" + "gpu" -> "groups[0].gpu"; a parent of "jobs[3]" and a field "[0]" join without
  // the dot). Ok stays ok.
  Status InField(std::string_view parent) && {
    if (rep_ && !parent.empty()) {
      if (rep_->field.empty()) {
        rep_->field = std::string(parent);
      } else {
        const bool index = rep_->field.front() == '[';
        rep_->field = std::string(parent) + (index ? "" : ".") + rep_->field;
      }
      rep_->Compose();
    }
    return std::move(*this);
  }
  // The same error with `context` before its detail ("store: " + detail), said once: a detail
  // that already starts with it is kept as it is. Ok stays ok.
  Status WithContext(std::string_view context) && {
    if (rep_ && !rep_->detail.starts_with(context)) {
      rep_->detail = std::string(context) + rep_->detail;
      rep_->Compose();
    }
    return std::move(*this);
  }

 private:
  struct Rep {
    StatusCode code = StatusCode::kInternal;
    std::string field;
    std::string detail;
    std::string message;  // field and detail, composed
    void Compose() { message = field.empty() ? detail : field + ": " + detail; }
  };
  Status(StatusCode code, std::string field, std::string detail)
      : rep_(std::make_unique<Rep>(Rep{code, std::move(field), std::move(detail), {}})) {
    rep_->Compose();
  }
  static const std::string& Empty() {
    static const std::string kEmpty;
    return kEmpty;
  }

  std::unique_ptr<Rep> rep_;  // null when ok: an ok Status is one pointer
};

inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kPermissionDenied:
      return "permission denied";
    case StatusCode::kConflict:
      return "conflict";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kInternal:
      return "internal";
    case StatusCode::kUnauthenticated:
      return "unauthenticated";
    case StatusCode::kResourceExhausted:
      return "resource exhausted";
  }
  return "internal";
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const& { return status_; }
  Status&& status() && { return std::move(status_); }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace arbiter
