// The Asio/Beast names the server uses, included in one place: Boost 1.74's awaitable.hpp uses
// std::exchange without including <utility>, so <utility> must come first.
#pragma once

// clang-format off
#include <utility>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
// clang-format on

namespace minfer::server {

namespace asio = boost::asio;

}  // namespace minfer::server
