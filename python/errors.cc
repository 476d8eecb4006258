// SPDX-License-Identifier: Apache-2.0
// Translates StatusError into rkv's Python exceptions (errors.h has the contract).
#include "python/errors.h"

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace rkv::python {

py::object ErrorObject(const Status& s) {
  // rkv._errors is in sys.modules (imported at init), so this is a dictionary lookup.
  return py::module_::import("rkv._errors")
      .attr("_from_status")(static_cast<int>(s.code()), CodeName(s.code()),
                            LenientStr(s.message()));
}

void RegisterStatusTranslator() {
  // Imported here so that a missing rkv/_errors.py fails the import of the module, not a call.
  py::module_::import("rkv._errors");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object exc = ErrorObject(e.status());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });
}

pybind11::str LenientStr(std::string_view text) {
  PyObject* o = PyUnicode_DecodeUTF8(text.data(), Py_ssize_t(text.size()), "backslashreplace");
  if (o == nullptr) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::str>(o);
}

}  // namespace rkv::python
