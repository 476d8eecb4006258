// SPDX-License-Identifier: Apache-2.0
// rkv.Client(address, **options): the keyword arguments -> rkv::Options.
//
// Contract: ParseOptions() reads every keyword of `kwargs` into *out (the names and types are
// the table in options.cc and docs/python.md; a value of None keeps the default). An unknown
// keyword or a value of the wrong type raises TypeError (py::type_error); a bad value rkv can
// judge here (an unknown exchange, auth_token with auth_token_file, an unreadable or unsafe token
// file, an int out of range) raises rkv.InvalidArgument (StatusError); the rest is checked by
// rkv::Client::Connect. Call with the GIL held (it reads Python objects and may read a file).
// Thread safety: pure function of its arguments. Ownership: none kept.
#ifndef RKV_PYTHON_OPTIONS_H_
#define RKV_PYTHON_OPTIONS_H_

#include <pybind11/pybind11.h>

#include <string>

#include "rkv/client.h"

namespace rkv::python {

void ParseOptions(const pybind11::kwargs& kwargs, Options* out);

// The bytes of a key, value or token: bytes and other bytes-like objects (buffer protocol,
// C-contiguous) as they are, str encoded as UTF-8. TypeError naming `what` otherwise.
std::string BytesOf(pybind11::handle obj, const char* what);

}  // namespace rkv::python

#endif  // RKV_PYTHON_OPTIONS_H_
