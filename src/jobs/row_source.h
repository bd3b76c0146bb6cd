// RowSource: where a batch job reads its rows (a CSV or JSON Lines file, an
// SQL query). Rows come in a fixed order, so a resumed job skips the rows its
// checkpoint counts and meets the same rows again.
//
// Thread-safety: none; one job thread reads a source.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "jobs/cell.h"

namespace inferd::jobs {

class RowSource {
 public:
  virtual ~RowSource() = default;
  // The column names, in order (a CSV header, the first JSON line's members,
  // the query's result columns).
  virtual const std::vector<std::string>& columns() const = 0;
  // The next row into *row (its ordinal set); false at the end. An error
  // means the source cannot go on (unreadable file, lost connection); a
  // single malformed record is a row with `error` set instead.
  virtual Result<bool> Next(Row* row) = 0;
  // For progress: the number of rows when the source knows it (an SQL
  // count), else how much of it has been read (a file's bytes), in [0, 1].
  virtual std::optional<int64_t> total_rows() const { return std::nullopt; }
  virtual std::optional<double> fraction_read() const { return std::nullopt; }
};

// Limits of the file sources: a record (CSV, possibly over several lines
// inside quotes) or a JSON line longer than this fails the job.
inline constexpr size_t kMaxRecordBytes = 64 << 20;

// RFC 4180 CSV with a header line: fields separated by ',', optionally in
// double quotes ("" inside quotes is one quote; quoted fields may span
// lines); CRLF or LF line ends; a UTF-8 BOM is skipped. Fields are text
// cells; empty unquoted fields are NULL. A record with a different number of
// fields than the header is a row error.
Result<std::unique_ptr<RowSource>> OpenCsvSource(const std::string& path);
// One JSON object per line; the columns are the first line's members; a
// later line lacking a member has NULL there, extra members are ignored.
// Numbers become integer or real cells, strings text, arrays of numbers
// NumberArray cells (others, and objects, JSON text), booleans 0/1. A line that is not a JSON object is a row error;
// blank lines are skipped (and not counted).
Result<std::unique_ptr<RowSource>> OpenJsonlSource(const std::string& path);

// The CSV record parser, exposed for tests and the fuzz target: splits one
// record from `text` starting at *pos (advancing it past the record's line
// end). false when *pos is at the end. A quote that never closes, or a
// quote in the middle of an unquoted field, is an error.
Result<bool> ParseCsvRecord(std::string_view text, size_t* pos, std::vector<Cell>* fields);

}  // namespace inferd::jobs
