#include <gtest/gtest.h>

#include "arbiter/plan.h"
#include "arbiter/quantity.h"

namespace arbiter {
namespace {

TEST(TimeFormat, DurationsDropLeadingZeroUnitsAndKeepMilliseconds) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(4 * kMillisPerSecond), "4s");
  EXPECT_EQ(FormatDuration(4250), "4.250s");
  EXPECT_EQ(FormatDuration((3 * 60 + 4) * kMillisPerSecond), "3m04s");
  EXPECT_EQ(FormatDuration(603 * kMillisPerSecond), "10m03s");
  EXPECT_EQ(FormatDuration((2 * 3600 + 3 * 60 + 4) * kMillisPerSecond), "2h03m04s");
  EXPECT_EQ(FormatDuration(((24 + 2) * 3600 + 3 * 60 + 4) * kMillisPerSecond), "1d 02h03m04s");
  EXPECT_EQ(FormatDuration(-90 * kMillisPerSecond), "-1m30s");
}

TEST(TimeFormat, CalendarTimeIsIso8601Utc) {
  EXPECT_EQ(FormatTime(0, TimeStyle::kCalendar), "1970-01-01T00:00:00Z");
  // 2026-12-02T08:40:00Z
  EXPECT_EQ(FormatTime(1796200800000, TimeStyle::kCalendar), "2026-12-02T08:40:00Z");
  EXPECT_EQ(FormatTime(951782400123, TimeStyle::kCalendar), "2000-02-29T00:00:00.123Z");
  EXPECT_EQ(FormatTime(-1000, TimeStyle::kCalendar), "1969-12-31T23:59:59Z");
  EXPECT_EQ(FormatTime(3600 * kMillisPerSecond, TimeStyle::kElapsed), "1h00m00s");
}

TEST(TimeFormat, ReasonsPrintTimesInTheDriversStyle) {
  Reason r;
  r.stage = Stage::kFilter;
  r.reserved_start = 3630 * kMillisPerSecond;
  EXPECT_NE(r.Describe().find("reserved, expected to start at 1h00m30s"), std::string::npos)
      << r.Describe();
  r.reserved_start = 1796200800000;
  EXPECT_NE(r.Describe(TimeStyle::kCalendar).find("at 2026-12-02T08:40:00Z"), std::string::npos)
      << r.Describe(TimeStyle::kCalendar);
  EXPECT_EQ(r.Describe().find("t="), std::string::npos);
}

}  // namespace
}  // namespace arbiter
