// SPDX-License-Identifier: Apache-2.0
// Keyword arguments of rkv.Client -> rkv::Options (options.h has the contract).
#include "python/options.h"

#include <climits>
#include <cstdint>
#include <functional>
#include <map>

#include "common/auth.h"
#include "python/errors.h"

namespace py = pybind11;

namespace rkv::python {
namespace {

[[noreturn]] void BadValue(const std::string& name, const std::string& why) {
  throw StatusError(Status(Code::kInvalidArgument, name + ": " + why));
}

int64_t Int(py::handle v, const std::string& name, int64_t lo, int64_t hi) {
  // bool is an int in Python; refuse it so that auto_reconnect=1-style slips are caught both ways.
  if (!PyLong_Check(v.ptr()) || PyBool_Check(v.ptr()))
    throw py::type_error(name + " must be an int, not " + Py_TYPE(v.ptr())->tp_name);
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow != 0 || x < lo || x > hi)
    BadValue(name, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], not " +
                       std::string(py::str(v)));
  return x;
}

bool Bool(py::handle v, const std::string& name) {
  if (!PyBool_Check(v.ptr()))
    throw py::type_error(name + " must be a bool, not " + Py_TYPE(v.ptr())->tp_name);
  return v.ptr() == Py_True;
}

std::string Str(py::handle v, const std::string& name) {
  if (!PyUnicode_Check(v.ptr()))
    throw py::type_error(name + " must be a str, not " + Py_TYPE(v.ptr())->tp_name);
  return v.cast<std::string>();
}

// A file name: str, bytes or os.PathLike.
std::string Path(py::handle v, const std::string& name) {
  PyObject* p = PyOS_FSPath(v.ptr());
  if (p == nullptr) {
    PyErr_Clear();
    throw py::type_error(name + " must be a path (str, bytes or os.PathLike), not " +
                         Py_TYPE(v.ptr())->tp_name);
  }
  py::object path = py::reinterpret_steal<py::object>(p);
  std::string s = PyBytes_Check(p) ? std::string(PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p))
                                   : path.cast<std::string>();
  // A C path ends at the first NUL: "/tmp/a\0b" must not open /tmp/a.
  if (s.find('\0') != std::string::npos)
    throw py::value_error(name + " must not contain a NUL character");
  return s;
}

using Setter = std::function<void(py::handle, const std::string&, Options*)>;

Setter IntField(int Options::*f, int64_t lo = 0, int64_t hi = INT_MAX) {
  return [f, lo, hi](py::handle v, const std::string& n, Options* o) {
    o->*f = static_cast<int>(Int(v, n, lo, hi));
  };
}
template <typename T>
Setter QpInt(T QpSettings::*f, int64_t lo, int64_t hi) {
  return [f, lo, hi](py::handle v, const std::string& n, Options* o) {
    o->qp.*f = static_cast<T>(Int(v, n, lo, hi));
  };
}
Setter ExchangeStr(std::string ExchangeOptions::*f) {
  return [f](py::handle v, const std::string& n, Options* o) { o->exchange.*f = Str(v, n); };
}
Setter ExchangePath(std::string ExchangeOptions::*f) {
  return [f](py::handle v, const std::string& n, Options* o) { o->exchange.*f = Path(v, n); };
}

// Keyword -> setter. Names follow rkv::Options, and kvctl's flags for the exchange and QP
// settings (common/verbs/conn_flags.cc).
const std::map<std::string, Setter>& Setters() {
  static const auto* setters = new std::map<std::string, Setter>{
      {"connect_timeout_ms", IntField(&Options::connect_timeout_ms, 1)},
      {"rpc_timeout_ms", IntField(&Options::rpc_timeout_ms, 1)},
      {"max_get_retries", IntField(&Options::max_get_retries, 1)},
      {"reply_spin_us", IntField(&Options::reply_spin_us, -1, 1000000)},
      {"auto_reconnect",
       [](py::handle v, const std::string& n, Options* o) { o->auto_reconnect = Bool(v, n); }},
      {"watch_cluster_map",
       [](py::handle v, const std::string& n, Options* o) { o->watch_cluster_map = Bool(v, n); }},
      {"reconnect_initial_backoff_ms", IntField(&Options::reconnect_initial_backoff_ms)},
      {"reconnect_max_backoff_ms", IntField(&Options::reconnect_max_backoff_ms)},
      {"reconnect_timeout_ms", IntField(&Options::reconnect_timeout_ms)},
      {"auth_token",
       [](py::handle v, const std::string& n, Options* o) {
         o->auth_token = BytesOf(v, n.c_str());
         if (o->auth_token.empty()) BadValue(n, "is empty (leave it out for no authentication)");
       }},
      // auth_token_file is read after the loop (it conflicts with auth_token).
      {"exchange",
       [](py::handle v, const std::string& n, Options* o) {
         const std::string name = Str(v, n);
         if (!ParseExchange(name, &o->exchange.method))
           BadValue(n, "'" + name + "' is not one of cm, rdma_cm, tcp, file, etcd");
       }},
      {"exchange_dir", ExchangePath(&ExchangeOptions::dir)},
      {"exchange_timeout_ms",
       [](py::handle v, const std::string& n, Options* o) {
         o->exchange.timeout_ms = static_cast<int>(Int(v, n, 1, INT_MAX));
       }},
      {"etcd_endpoint", ExchangeStr(&ExchangeOptions::etcd_endpoint)},
      {"etcd_prefix", ExchangeStr(&ExchangeOptions::etcd_prefix)},
      {"etcd_cacert", ExchangePath(&ExchangeOptions::etcd_cacert)},
      {"etcd_cert", ExchangePath(&ExchangeOptions::etcd_cert)},
      {"etcd_key", ExchangePath(&ExchangeOptions::etcd_key)},
      {"etcd_user", ExchangeStr(&ExchangeOptions::etcd_user)},
      {"etcd_password_file", ExchangePath(&ExchangeOptions::etcd_password_file)},
      {"device", [](py::handle v, const std::string& n, Options* o) { o->qp.device = Str(v, n); }},
      {"ib_port", QpInt(&QpSettings::port, 0, 255)},
      {"gid_index", QpInt(&QpSettings::gid_index, -1, 255)},
      {"path_mtu", QpInt(&QpSettings::path_mtu, 0, 4096)},
      {"pkey_index", QpInt(&QpSettings::pkey_index, 0, 65535)},
      {"pkey", QpInt(&QpSettings::pkey, -1, 0xffff)},
      {"sl", QpInt(&QpSettings::sl, 0, 15)},
      {"src_path_bits", QpInt(&QpSettings::src_path_bits, 0, 127)},
      {"traffic_class", QpInt(&QpSettings::traffic_class, 0, 255)},
      {"hop_limit", QpInt(&QpSettings::hop_limit, 0, 255)},
      {"psn", QpInt(&QpSettings::psn, -1, 0xffffff)},
      {"max_rd_atomic", QpInt(&QpSettings::max_rd_atomic, -1, 16)},
      {"max_dest_rd_atomic", QpInt(&QpSettings::max_dest_rd_atomic, -1, 16)},
      {"min_rnr_timer", QpInt(&QpSettings::min_rnr_timer, 0, 31)},
      {"qp_timeout", QpInt(&QpSettings::timeout, 0, 31)},
      {"retry_cnt", QpInt(&QpSettings::retry_cnt, 0, 7)},
      {"rnr_retry", QpInt(&QpSettings::rnr_retry, 0, 7)},
      {"grh", [](py::handle v, const std::string& n, Options* o) { o->qp.grh = Bool(v, n); }},
  };
  return *setters;
}

}  // namespace

std::string BytesOf(py::handle obj, const char* what) {
  PyObject* p = obj.ptr();
  if (PyBytes_Check(p)) return std::string(PyBytes_AS_STRING(p), PyBytes_GET_SIZE(p));
  if (PyUnicode_Check(p)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(p, &n);
    if (s == nullptr) throw py::error_already_set();
    return std::string(s, n);
  }
  if (PyObject_CheckBuffer(p)) {
    Py_buffer view;
    if (PyObject_GetBuffer(p, &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
    std::string bytes(static_cast<const char*>(view.buf), view.len);
    PyBuffer_Release(&view);
    return bytes;
  }
  throw py::type_error(std::string(what) + " must be bytes, a bytes-like object or str, not " +
                       Py_TYPE(p)->tp_name);
}

void ParseOptions(const py::kwargs& kwargs, Options* out) {
  py::handle token_file;
  for (const auto& item : kwargs) {
    const std::string name = py::str(item.first);
    if (item.second.is_none()) continue;
    if (name == "auth_token_file") {
      token_file = item.second;
      continue;
    }
    const auto it = Setters().find(name);
    if (it == Setters().end())
      throw py::type_error("rkv.Client() got an unexpected keyword argument '" + name + "'");
    it->second(item.second, name, out);
  }
  if (token_file) {
    if (!out->auth_token.empty())
      BadValue("auth_token_file", "give auth_token or auth_token_file, not both");
    // The same reader (and checks) as kvserver, kvctl and kvbench --auth_token_file.
    Check(auth::LoadTokenFile(Path(token_file, "auth_token_file"), &out->auth_token));
  }
}

}  // namespace rkv::python
