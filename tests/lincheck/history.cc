// SPDX-License-Identifier: Apache-2.0
#include "tests/lincheck/history.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rkv::lincheck {
namespace {

std::string Encode(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  static const char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : s) {
    if (c <= 0x20 || c >= 0x7f || c == '%') {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool Decode(const std::string& s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      *out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return false;
    int hi = HexDigit(s[i + 1]), lo = HexDigit(s[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += char(hi * 16 + lo);
    i += 2;
  }
  return true;
}

bool ParseInt(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  *v = x;
  return true;
}

}  // namespace

const char* OpTypeName(OpType t) {
  switch (t) {
    case OpType::kPut:
      return "put";
    case OpType::kGet:
      return "get";
    case OpType::kDelete:
      return "del";
  }
  return "?";
}

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kOk:
      return "ok";
    case Outcome::kNotFound:
      return "notfound";
    case Outcome::kUnknown:
      return "unknown";
    case Outcome::kFailed:
      return "failed";
  }
  return "?";
}

std::string Describe(const Op& op, int64_t origin_ns) {
  char times[96];
  std::snprintf(times, sizeof times, "[%.3f ms, %.3f ms]", double(op.call_ns - origin_ns) / 1e6,
                double(op.return_ns - origin_ns) / 1e6);
  std::string s = "client " + std::to_string(op.client) + " ";
  switch (op.type) {
    case OpType::kPut:
      s += "PUT " + Encode(op.value);
      if (op.outcome != Outcome::kOk) s += std::string(" (") + OutcomeName(op.outcome) + ")";
      break;
    case OpType::kGet:
      s += op.outcome == Outcome::kOk ? "GET -> " + Encode(op.value)
                                      : std::string("GET -> ") + OutcomeName(op.outcome);
      break;
    case OpType::kDelete:
      s += std::string("DELETE -> ") + OutcomeName(op.outcome);
      break;
  }
  return s + " " + times;
}

bool History::Save(const std::string& path, std::string* error) const {
  std::ofstream out(path, std::ios::trunc);
  if (!out) {
    *error = "cannot open " + path + " for writing: " + std::strerror(errno);
    return false;
  }
  out << "rkv-history 1\n";
  std::string line;
  for (const Op& op : ops_) {
    line.clear();
    line += std::to_string(op.client);
    line += ' ';
    line += OpTypeName(op.type);
    line += ' ';
    line += Encode(op.key);
    line += ' ';
    line += std::to_string(op.call_ns);
    line += ' ';
    line += std::to_string(op.return_ns);
    line += ' ';
    line += OutcomeName(op.outcome);
    bool has_value =
        op.type == OpType::kPut || (op.type == OpType::kGet && op.outcome == Outcome::kOk);
    line += has_value ? " =" + Encode(op.value) : std::string(" -");
    line += '\n';
    out << line;
  }
  out.flush();
  if (!out) {
    *error = "write to " + path + " failed: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool History::Load(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  std::vector<Op> ops;
  std::string line;
  size_t lineno = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    auto fail = [&](const std::string& why) {
      *error = path + ":" + std::to_string(lineno) + ": " + why + ": " + line.substr(0, 200);
      return false;
    };
    if (!header) {
      if (line != "rkv-history 1") return fail("expected the header 'rkv-history 1'");
      header = true;
      continue;
    }
    std::istringstream fields(line);
    std::string f[7], extra;
    for (auto& x : f) fields >> x;
    if (f[6].empty() || (fields >> extra)) return fail("expected 7 fields");
    Op op;
    int64_t client;
    if (!ParseInt(f[0], &client) || client < 0 || client > UINT32_MAX) return fail("bad client");
    op.client = uint32_t(client);
    if (f[1] == "put") {
      op.type = OpType::kPut;
    } else if (f[1] == "get") {
      op.type = OpType::kGet;
    } else if (f[1] == "del") {
      op.type = OpType::kDelete;
    } else {
      return fail("bad op");
    }
    if (!Decode(f[2], &op.key)) return fail("bad key encoding");
    if (!ParseInt(f[3], &op.call_ns) || !ParseInt(f[4], &op.return_ns) || op.return_ns < op.call_ns)
      return fail("bad times");
    if (f[5] == "ok") {
      op.outcome = Outcome::kOk;
    } else if (f[5] == "notfound") {
      op.outcome = Outcome::kNotFound;
    } else if (f[5] == "unknown") {
      op.outcome = Outcome::kUnknown;
    } else if (f[5] == "failed") {
      op.outcome = Outcome::kFailed;
    } else {
      return fail("bad result");
    }
    bool has_value =
        op.type == OpType::kPut || (op.type == OpType::kGet && op.outcome == Outcome::kOk);
    if (has_value) {
      if (f[6][0] != '=' || !Decode(f[6].substr(1), &op.value)) return fail("bad value");
    } else if (f[6] != "-") {
      return fail("this op has no value: expected '-'");
    }
    ops.push_back(std::move(op));
  }
  if (!header) {
    *error = path + ": empty (no 'rkv-history 1' header)";
    return false;
  }
  ops_ = std::move(ops);
  return true;
}

}  // namespace rkv::lincheck
