// SPDX-License-Identifier: Apache-2.0
// rkv._rkv: the Python binding of rkv::Client (the package python/rkv re-exports it as rkv.Client).
//
// Contract: a Python rkv.Client owns one rkv::Client (null once closed). Every call that waits on
// the network (connect, get, put, delete, multi_get, execute, stats, reconnect, close) first copies
// its arguments out of Python objects, then releases the GIL, then takes the Client's mutex; it
// drops the mutex before it reacquires the GIL (the lock's scope ends inside the GIL release's),
// so no thread ever holds the mutex while waiting for the GIL: no deadlock. Failures are thrown
// as StatusError (python/errors.h) and raised as rkv.Error subclasses. Keys and values: bytes out;
// bytes, bytes-like objects or str (UTF-8) in.
// Thread safety: one rkv.Client may be used by many Python threads (calls are serialized by the
// mutex; an rkv::Client itself is not thread-safe). Ownership: the Python object owns the
// rkv::Client; close() or the object's destruction disconnects.
#include <arpa/inet.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <charconv>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "python/errors.h"
#include "python/options.h"
#include "rkv/client.h"

namespace py = pybind11;

namespace rkv::python {
namespace {

const Status& Closed() {
  static const auto* s = new Status(Code::kInvalidArgument, "rkv.Client is closed");
  return *s;
}

std::string Gid(const uint8_t gid[16]) {
  char text[INET6_ADDRSTRLEN] = {};
  return inet_ntop(AF_INET6, gid, text, sizeof text) ? text : "";
}

py::dict ConnParamsDict(const ConnParams& p) {
  py::dict d;
  d["transport"] = p.transport == Transport::kRC   ? "RC"
                   : p.transport == Transport::kUC ? "UC"
                                                   : "UD";
  d["link_layer"] = p.link_layer == kLinkInfiniBand ? "InfiniBand" : "Ethernet";
  d["port"] = p.port_num;
  d["gid_index"] = p.gid_index;
  d["gid"] = Gid(p.gid);
  d["lid"] = p.lid;
  d["qp_num"] = p.qp_num;
  d["psn"] = p.psn;
  d["path_mtu"] = 128u << p.path_mtu;  // enum ibv_mtu 1..5 -> 256..4096 bytes
  d["active_mtu"] = 128u << p.active_mtu;
  d["pkey_index"] = p.pkey_index;
  d["pkey"] = p.pkey;
  d["sl"] = p.sl;
  d["src_path_bits"] = p.src_path_bits;
  d["max_rd_atomic"] = p.max_rd_atomic;
  d["max_dest_rd_atomic"] = p.max_dest_rd_atomic;
  d["min_rnr_timer"] = p.min_rnr_timer;
  d["timeout"] = p.timeout;
  d["retry_cnt"] = p.retry_cnt;
  d["rnr_retry"] = p.rnr_retry;
  d["hop_limit"] = p.hop_limit;
  d["traffic_class"] = p.traffic_class;
  d["remote_addr"] = p.remote_addr;  // 0: rkeys are zero-based
  d["rkey"] = p.rkey;
  d["region_size"] = p.region_size;
  return d;
}

// "name value" lines -> {name: int or str}.
py::dict ParseStats(std::string_view text) {
  py::dict d;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    const size_t sp = line.find(' ');
    if (line.empty() || sp == 0 || sp == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, sp), value = line.substr(sp + 1);
    int64_t i = 0;
    uint64_t u = 0;
    const char* end = value.data() + value.size();
    if (!value.empty() && std::from_chars(value.data(), end, u).ptr == end)
      d[LenientStr(name)] = u;
    else if (!value.empty() && std::from_chars(value.data(), end, i).ptr == end)
      d[LenientStr(name)] = i;
    else
      d[LenientStr(name)] = LenientStr(value);
  }
  return d;
}

class PyClient {
 public:
  PyClient(std::string address, std::unique_ptr<Client> client)
      : address_(std::move(address)), client_(std::move(client)) {}
  // Python destroys the object only when no thread uses it (a call holds a reference), so the
  // mutex is free here; the GIL stays held while rkv disconnects.
  ~PyClient() = default;

  static std::unique_ptr<PyClient> Create(const std::string& address, const py::kwargs& kwargs) {
    Options options;
    ParseOptions(kwargs, &options);
    std::unique_ptr<Client> client;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = Client::Connect(address, options, &client);
    }
    Check(s);
    return std::make_unique<PyClient>(address, std::move(client));
  }

  py::object Get(py::handle key_obj) {
    const std::string key = BytesOf(key_obj, "key");
    std::string value;
    const Status s = Locked([&](Client* c) { return c->Get(key, &value); });
    if (s.IsNotFound()) return py::none();
    Check(s);
    return py::bytes(value);
  }

  void Put(py::handle key_obj, py::handle value_obj) {
    const std::string key = BytesOf(key_obj, "key");
    const std::string value = BytesOf(value_obj, "value");
    Check(Locked([&](Client* c) { return c->Put(key, value); }));
  }

  bool Delete(py::handle key_obj) {
    const std::string key = BytesOf(key_obj, "key");
    const Status s = Locked([&](Client* c) { return c->Delete(key); });
    if (s.IsNotFound()) return false;
    Check(s);
    return true;
  }

  py::list MultiGet(py::handle keys_obj) {
    if (PyUnicode_Check(keys_obj.ptr()) || PyBytes_Check(keys_obj.ptr()) ||
        PyByteArray_Check(keys_obj.ptr()))
      throw py::type_error("multi_get takes an iterable of keys, not one key");
    std::vector<std::string> keys;
    for (py::handle k : py::iter(keys_obj)) keys.push_back(BytesOf(k, "key"));
    std::vector<std::string_view> views(keys.begin(), keys.end());
    std::vector<std::string> values;
    std::vector<Status> statuses;
    if (!keys.empty())
      Check(Locked([&](Client* c) { return c->MultiGet(views, &values, &statuses); }));
    py::list out;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (statuses[i].IsNotFound()) {
        out.append(py::none());
        continue;
      }
      if (!statuses[i].ok())
        throw StatusError(
            Status(statuses[i].code(), "key #" + std::to_string(i) + ": " + statuses[i].message()));
      out.append(py::bytes(values[i]));
    }
    return out;
  }

  // execute([("get", key), ("put", key, value), ("delete", key), ...]): one pipelined batch
  // (rkv::Client::Execute). A list with one result per operation: get -> bytes or None (absent);
  // put -> True; delete -> True (deleted) or False (absent); an operation that failed -> its
  // rkv.Error instance (not raised: the others may have succeeded; a lost connection gives each
  // unanswered write an error saying whether it was sent). Malformed operations raise
  // TypeError/ValueError before anything is sent.
  py::list Execute(py::handle ops_obj) {
    if (PyUnicode_Check(ops_obj.ptr()) || PyBytes_Check(ops_obj.ptr()))
      throw py::type_error("execute takes an iterable of (op, key[, value]) tuples");
    std::vector<std::string> keys, values;
    std::vector<BatchOp::Type> types;
    for (py::handle item : py::iter(ops_obj)) {
      py::tuple t = py::reinterpret_borrow<py::object>(item).cast<py::tuple>();
      if (t.size() < 2) throw py::value_error("an operation is (op, key) or (\"put\", key, value)");
      const std::string op = t[0].cast<std::string>();
      if (op == "get" || op == "delete") {
        if (t.size() != 2) throw py::value_error(op + " takes (op, key)");
        types.push_back(op == "get" ? BatchOp::Type::kGet : BatchOp::Type::kDelete);
        values.emplace_back();
      } else if (op == "put") {
        if (t.size() != 3) throw py::value_error("put takes (\"put\", key, value)");
        types.push_back(BatchOp::Type::kPut);
        values.push_back(BytesOf(t[2], "value"));
      } else {
        throw py::value_error("unknown operation '" + op + "' (get, put or delete)");
      }
      keys.push_back(BytesOf(t[1], "key"));
    }
    std::vector<std::string> got(keys.size());
    std::vector<BatchOp> ops(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      ops[i].type = types[i];
      ops[i].key = keys[i];
      ops[i].value = values[i];
      ops[i].result = &got[i];
    }
    if (!ops.empty()) {
      // Per-operation statuses carry the outcome; only a closed client raises here.
      Status s = Locked([&](Client* c) {
        (void)c->Execute(&ops);
        return Status::Ok();
      });
      Check(s);
    }
    py::list out;
    for (size_t i = 0; i < ops.size(); ++i) {
      const Status& st = ops[i].status;
      if (st.ok()) {
        if (types[i] == BatchOp::Type::kGet)
          out.append(py::bytes(got[i]));
        else
          out.append(py::bool_(true));
      } else if (st.IsNotFound()) {
        if (types[i] == BatchOp::Type::kGet)
          out.append(py::none());
        else
          out.append(py::bool_(false));
      } else {
        out.append(ErrorObject(st));
      }
    }
    return out;
  }

  py::dict Stats() {
    std::string text;
    Check(Locked([&](Client* c) { return c->Stats(&text); }));
    return ParseStats(text);
  }

  bool Reconnect() {
    const Status s = Locked([&](Client* c) { return c->Reconnect(); });
    if (s.code() == Code::kServerRestarted) return true;
    Check(s);
    return false;
  }

  void Close() {
    std::unique_ptr<Client> client;
    py::gil_scoped_release nogil;
    MutexLock lock(&mu_);
    client = std::move(client_);
    client.reset();  // disconnects, GIL released, before the lock is dropped
  }

  bool closed() {
    py::gil_scoped_release nogil;
    MutexLock lock(&mu_);
    return client_ == nullptr;
  }

  py::dict Counters() {
    ClientCounters c;
    Check(Locked([&](Client* client) {
      c = client->counters();
      return Status::Ok();
    }));
    py::dict d;
    d["gets"] = c.gets;
    d["reads_posted"] = c.reads_posted;
    d["round_trips"] = c.round_trips;
    d["checksum_retries"] = c.checksum_retries;
    d["rpcs"] = c.rpcs;
    d["reconnects"] = c.reconnects;
    d["server_restarts"] = c.server_restarts;
    d["bytes_read"] = c.bytes_read;
    d["cache_hits"] = c.cache_hits;
    d["cache_misses"] = c.cache_misses;
    return d;
  }

  py::dict Info() {
    ServerInfo i;
    Check(Locked([&](Client* client) {
      i = client->server_info();
      return Status::Ok();
    }));
    py::dict d;
    d["instance_id"] = i.instance_id;
    d["region_addr"] = i.region_addr;
    d["rkey"] = i.rkey;
    d["region_size"] = i.region_size;
    d["num_buckets"] = i.num_buckets;
    d["overflow_slots"] = i.overflow_slots;
    d["hash_seed"] = i.hash_seed;
    d["max_key_size"] = i.max_key_size;
    d["max_value_size"] = i.max_value_size;
    d["protocol_version"] = i.protocol_version;
    d["request_credits"] = i.request_credits;
    d["device"] = i.device;
    d["port"] = i.port;
    d["qp_num"] = i.qp_num;
    d["path_mtu"] = i.path_mtu;
    d["gid_index"] = i.gid_index;
    d["link_layer"] = i.link_layer;
    d["exchange"] = ExchangeName(i.exchange);
    d["local"] = ConnParamsDict(i.local);
    d["peer"] = ConnParamsDict(i.peer);
    d["mtu_note"] = i.mtu_note;
    return d;
  }

  const std::string& address() const { return address_; }

 private:
  // Runs fn(client) with the GIL released and the mutex held; the closed-client error if closed.
  // The MutexLock is destroyed before the gil_scoped_release: the mutex is dropped first.
  template <typename Fn>
  Status Locked(Fn&& fn) {
    py::gil_scoped_release nogil;
    MutexLock lock(&mu_);
    if (client_ == nullptr) return Closed();
    return fn(client_.get());
  }

  const std::string address_;
  Mutex mu_;
  std::unique_ptr<Client> client_ GUARDED_BY(mu_);
};

}  // namespace
}  // namespace rkv::python

PYBIND11_MODULE(_rkv, m) {
  using rkv::python::PyClient;
  rkv::python::RegisterStatusTranslator();
  m.doc() = "rkv's C++ client (rkv::Client); use the rkv package.";
  py::class_<PyClient>(m, "Client", R"(A connection to one kvserver.

Client(address, **options) connects to "HOST:PORT", or to a cluster at
"etcd://HOST:PORT[,HOST:PORT]/NAME" (see docs/python.md for the options).
Keys and values are bytes (bytes-like objects and str, encoded as UTF-8, are accepted as
input). Failures raise rkv.Error subclasses carrying .code and .code_name. The GIL is released
while a call waits on the network; one Client may be shared by threads (calls are serialized).)")
      .def(py::init(&PyClient::Create), py::arg("address"))
      .def("get", &PyClient::Get, py::arg("key"),
           "The value of key (bytes), or None if the key is absent.")
      .def("put", &PyClient::Put, py::arg("key"), py::arg("value"), "Stores value under key.")
      .def("delete", &PyClient::Delete, py::arg("key"),
           "Deletes key: True if it was deleted, False if it was absent.")
      .def("multi_get", &PyClient::MultiGet, py::arg("keys"),
           "The values of keys (an iterable) in order: bytes, or None for an absent key. "
           "Their READs are posted together.")
      .def("execute", &PyClient::Execute, py::arg("ops"),
           "One pipelined batch: ops is an iterable of (\"get\", key), (\"put\", key, value) "
           "and (\"delete\", key). Returns one result per operation: bytes or None (get), "
           "True (put), True or False (delete: deleted or absent), or the operation's rkv.Error "
           "instance (not raised). Writes are applied in order (through a cluster address: per "
           "key); "
           "writes are in flight up to the "
           "server's request credits while the GETs' READs go out together.")
      .def("stats", &PyClient::Stats,
           "The server's counters: {name: int or str} (kvctl stats' lines).")
      .def("reconnect", &PyClient::Reconnect,
           "Drops the connection and connects again to the same address (one attempt). "
           "Returns True if the server is a new instance (its table contents are lost).")
      .def("close", &PyClient::Close, "Disconnects; later calls raise rkv.InvalidArgument.")
      .def_property_readonly("closed", &PyClient::closed)
      .def_property_readonly("address", &PyClient::address)
      .def_property_readonly("counters", &PyClient::Counters,
                             "This client's counters (cumulative since connect).")
      .def_property_readonly("server_info", &PyClient::Info,
                             "What the server granted at connect and the connection in use.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyClient& self, py::handle, py::handle, py::handle) {
             self.Close();
             return false;
           })
      .def("__repr__", [](PyClient& self) {
        return "<rkv.Client " + self.address() + (self.closed() ? " closed>" : ">");
      });
}
