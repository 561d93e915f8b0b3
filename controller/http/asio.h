// The one place that includes Boost.Asio and Boost.Beast. Boost 1.74's
// asio/awaitable.hpp uses std::exchange without including <utility>, which
// breaks under C++20 unless <utility> comes first; every file that needs Asio
// or Beast includes this header instead of the Boost headers.
#pragma once

// clang-format off
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
// clang-format on

// For every room of controller/ that serves or calls over Asio.
namespace rsc::controller {

namespace asio = boost::asio;
namespace beast = boost::beast;

}  // namespace rsc::controller
