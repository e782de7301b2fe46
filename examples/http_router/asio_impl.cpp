// The compiled part of Boost.Asio and Boost.Beast, once for the whole program
// (BOOST_ASIO_SEPARATE_COMPILATION and BOOST_BEAST_SEPARATE_COMPILATION are
// set for every file that includes them; see CMakeLists.txt).
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
