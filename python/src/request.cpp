// select()'s Python arguments as a kvroute request; see request.hpp.
#include "request.hpp"

#include <cstring>
#include <string>

namespace py = pybind11;

namespace kvroute_py {

namespace {

std::string type_name(py::handle o) { return py::str(py::type::handle_of(o).attr("__name__")); }

// A buffer of 4-byte unsigned ints in one contiguous row (array('I'),
// numpy.uint32), copied at once; false for any other buffer.
bool copy_u32_buffer(py::handle o, std::vector<std::uint32_t>& out) {
  if (!PyObject_CheckBuffer(o.ptr())) return false;
  const py::buffer_info b = py::reinterpret_borrow<py::buffer>(o).request();
  const std::string f = b.format;
  const bool u32 = b.itemsize == 4 && (f == "I" || f == "=I" || f == "<I" || f == "@I");
  if (!u32 || b.ndim != 1 || (b.size > 1 && b.strides[0] != 4)) return false;
  out.resize(static_cast<std::size_t>(b.size));
  if (b.size > 0) std::memcpy(out.data(), b.ptr, out.size() * 4);
  return true;
}

std::vector<std::uint32_t> tokens_of(py::handle o) {
  std::vector<std::uint32_t> out;
  if (o.is_none()) return out;
  if (PyUnicode_Check(o.ptr()) || PyBytes_Check(o.ptr()) || !py::isinstance<py::iterable>(o)) {
    throw py::type_error("tokens must be an iterable of ints (token ids), not " + type_name(o));
  }
  if (copy_u32_buffer(o, out)) return out;
  for (py::handle item : o) {
    const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(item.ptr()));
    unsigned long long v = 0;
    if (index) v = PyLong_AsUnsignedLongLong(index.ptr());
    if (!index || PyErr_Occurred() || v > 0xFFFFFFFFull) {
      PyErr_Clear();
      throw py::value_error("tokens[" + std::to_string(out.size()) +
                            "]: " + std::string(py::repr(item)) +
                            " is not a token id (an int in [0, 2**32))");
    }
    out.push_back(static_cast<std::uint32_t>(v));
  }
  return out;
}

std::unique_ptr<kvroute::HeaderList> headers_of(py::handle o) {
  if (o.is_none()) return nullptr;
  py::object pairs;
  if (PyDict_Check(o.ptr()) || py::hasattr(o, "items")) {
    pairs = o.attr("items")();
  } else if (py::isinstance<py::iterable>(o) && !PyUnicode_Check(o.ptr()) &&
             !PyBytes_Check(o.ptr())) {
    pairs = py::reinterpret_borrow<py::object>(o);
  } else {
    throw py::type_error("headers must be a mapping or an iterable of (name, value) pairs, not " +
                         type_name(o));
  }
  auto list = std::make_unique<kvroute::HeaderList>();
  for (py::handle pair : pairs) {
    if (!py::isinstance<py::sequence>(pair) || PyUnicode_Check(pair.ptr()) || py::len(pair) != 2) {
      throw py::type_error("headers: each item must be a (name, value) pair, not " +
                           std::string(py::repr(pair)));
    }
    const auto nv = py::reinterpret_borrow<py::sequence>(pair);
    const py::object name = nv[0];
    const py::object value = nv[1];
    list->add(bytes_of(name, "a header name"), bytes_of(value, "a header value"));
  }
  return list;
}

}  // namespace

std::string_view bytes_of(py::handle o, const char* what) {
  if (PyUnicode_Check(o.ptr())) {
    Py_ssize_t n = 0;
    const char* p = PyUnicode_AsUTF8AndSize(o.ptr(), &n);
    if (p == nullptr) throw py::error_already_set();
    return {p, static_cast<std::size_t>(n)};
  }
  if (PyBytes_Check(o.ptr())) {
    char* p = nullptr;
    Py_ssize_t n = 0;
    if (PyBytes_AsStringAndSize(o.ptr(), &p, &n) != 0) throw py::error_already_set();
    return {p, static_cast<std::size_t>(n)};
  }
  throw py::type_error(std::string(what) + " must be str or bytes, not " + type_name(o));
}

OwnedRequest::OwnedRequest(py::handle text, py::handle tokens, py::handle headers, py::handle model)
    : tokens_(tokens_of(tokens)), headers_(headers_of(headers)) {
  if (!text.is_none()) {
    text_ = bytes_of(text, "text");
    text_owner_ = py::reinterpret_borrow<py::object>(text);
  }
  if (!model.is_none()) model_ = std::string(bytes_of(model, "model"));
}

}  // namespace kvroute_py
