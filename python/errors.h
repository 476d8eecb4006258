// SPDX-License-Identifier: Apache-2.0
// rkv::Status -> Python exception (rkv.Error and its per-code subclasses, python/rkv/_errors.py).
//
// Contract: C++ code of the extension reports an rkv failure by throwing StatusError (never
// while the GIL is released and a Python object is being touched: it only carries a Status).
// RegisterStatusTranslator() installs a pybind11 exception translator that turns a StatusError
// into the rkv._errors class for its code, with .code, .code_name and .message set.
// Thread safety: StatusError is a value; the translator runs with the GIL held (pybind11).
// Ownership: none (exceptions own their Status copy).
#ifndef RKV_PYTHON_ERRORS_H_
#define RKV_PYTHON_ERRORS_H_

#include <pybind11/pybind11.h>

#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "rkv/status.h"

namespace rkv::python {

class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

// Throws StatusError(s) unless s is OK.
inline void Check(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}

// The rkv.Error instance (of the code's subclass) for a failed Status, not raised: per-operation
// results (Client.execute). GIL held.
pybind11::object ErrorObject(const Status& s);

// Once, at module initialisation (needs rkv._errors importable).
void RegisterStatusTranslator();

// Text from C++ that may not be UTF-8 (a server's message, its stats): decoded with
// "backslashreplace", so a stray byte shows as \xNN instead of raising UnicodeDecodeError.
pybind11::str LenientStr(std::string_view text);

}  // namespace rkv::python

#endif  // RKV_PYTHON_ERRORS_H_
