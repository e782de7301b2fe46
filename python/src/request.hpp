// -----------------------------------------------------------------------------
// File: python/src/request.hpp
// -----------------------------------------------------------------------------
//
// `OwnedRequest`: a request built from `select()`'s Python arguments that
// owns what its `kvroute::RequestView` points at, so the view stays valid
// with the GIL released and later, for `report_cached` and `dispatch`. The
// text is not copied: the request keeps a reference to the Python `str`
// (or `bytes`) and views its UTF-8 bytes, which CPython caches in the
// object for as long as it lives. Tokens, headers and the model are copied.
//
// Thread safety: a value; built and destroyed with the GIL held (it holds a
// Python reference), read from any thread.

#ifndef KVROUTE_PYTHON_REQUEST_HPP_
#define KVROUTE_PYTHON_REQUEST_HPP_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvroute/request.hpp"

namespace kvroute_py {

class OwnedRequest {
 public:
  // Throws TypeError or ValueError naming the argument at fault: `text` is
  // str, bytes or None; `tokens` an iterable of ints in [0, 2^32) or a
  // buffer of 4-byte unsigned ints, or None; `headers` a mapping or an
  // iterable of (name, value) pairs of str or bytes, or None; `model` a str.
  OwnedRequest(pybind11::handle text, pybind11::handle tokens, pybind11::handle headers,
               pybind11::handle model);

  kvroute::RequestView view() const noexcept {
    return {.text = text_,
            .tokens = tokens_,
            .headers = headers_ ? headers_->view() : std::span<const kvroute::Header>{},
            .model = model_};
  }

 private:
  pybind11::object text_owner_;
  std::string_view text_;
  std::vector<std::uint32_t> tokens_;
  std::unique_ptr<kvroute::HeaderList> headers_;  // null when there are none
  std::string model_;
};

// The UTF-8 bytes of a str, or the bytes of a bytes object, viewed (valid
// while `o` lives). Throws TypeError for anything else, naming `what`.
std::string_view bytes_of(pybind11::handle o, const char* what);

}  // namespace kvroute_py

#endif  // KVROUTE_PYTHON_REQUEST_HPP_
