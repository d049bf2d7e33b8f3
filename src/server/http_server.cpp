#include "server/http_server.h"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <csignal>
#include <thread>
#include <vector>

#include "base/error.h"

namespace minfer::server {
namespace {

using asio::ip::tcp;
constexpr auto kUseAwaitable = asio::use_awaitable;

auto with_error(beast::error_code& ec) { return asio::redirect_error(kUseAwaitable, ec); }

// The client is gone for good (as opposed to a request we could not parse).
bool is_disconnect(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::operation_aborted || ec == beast::error::timeout;
}

}  // namespace

struct Connection::PeerWatch {
  bool active = true;  // false once the Connection is gone (the socket may be too)
  bool gone = false;
  std::function<void()> on_gone;
};

Connection::Connection(beast::tcp_stream& stream, TlsStream* tls, const HttpRequest& request, bool draining)
    : stream_(stream),
      tls_(tls),
      version_(request.version()),
      keep_alive_(request.keep_alive() && !draining),
      watch_(std::make_shared<PeerWatch>()) {}

Connection::~Connection() { watch_->active = false; }

asio::any_io_executor Connection::executor() const { return stream_.get_executor(); }

bool Connection::peer_gone() const { return watch_->gone; }

void Connection::watch_peer(std::function<void()> on_gone) {
  watch_->on_gone = std::move(on_gone);
  auto watch = watch_;
  tcp::socket& socket = stream_.socket();
  // Readable means: data (a pipelined request: leave it for the next read), EOF or an error (gone).
  socket.async_wait(tcp::socket::wait_read, [watch, &socket](const beast::error_code& ec) {
    if (!watch->active || ec == asio::error::operation_aborted) return;
    bool gone = static_cast<bool>(ec);
    if (!gone) {
      char byte;
      beast::error_code peek_ec;
      const size_t n = socket.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, peek_ec);
      gone = peek_ec ? peek_ec != asio::error::would_block : n == 0;
    }
    if (gone && !watch->gone) {
      watch->gone = true;
      if (watch->on_gone) watch->on_gone();
    }
  });
}

asio::awaitable<void> Connection::send(http::status status, std::string body, std::string_view content_type) {
  http::response<http::string_body> res{status, version_};
  res.set(http::field::server, "minfer");
  if (!content_type.empty()) res.set(http::field::content_type, std::string(content_type));
  for (const auto& [name, value] : headers_) res.set(name, value);
  res.keep_alive(keep_alive_);
  res.body() = std::move(body);
  res.prepare_payload();
  status_ = static_cast<int>(status);
  const beast::error_code ec = co_await write([&](auto& s, beast::error_code& e) -> asio::awaitable<void> {
    co_await http::async_write(s, res, with_error(e));
  });
  if (ec) keep_alive_ = false;
}

template <typename Op>
asio::awaitable<beast::error_code> Connection::write(Op op) {
  beast::error_code ec;
  stream_.expires_after(std::chrono::seconds(120));
  if (tls_)
    co_await op(*tls_, ec);
  else
    co_await op(stream_, ec);
  stream_.expires_never();
  co_return ec;
}

asio::awaitable<bool> Connection::start_stream(std::string_view content_type) {
  http::response<http::empty_body> res{http::status::ok, version_};
  res.set(http::field::server, "minfer");
  res.set(http::field::content_type, std::string(content_type));
  res.set(http::field::cache_control, "no-cache");
  for (const auto& [name, value] : headers_) res.set(name, value);
  status_ = 200;
  chunked_ = version_ >= 11;
  if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the end of the connection ends the body
  res.keep_alive(keep_alive_);
  res.chunked(chunked_);
  http::response_serializer<http::empty_body> serializer{res};
  const beast::error_code ec = co_await write([&](auto& s, beast::error_code& e) -> asio::awaitable<void> {
    co_await http::async_write_header(s, serializer, with_error(e));
  });
  if (ec) keep_alive_ = false;
  co_return !ec;
}

asio::awaitable<bool> Connection::send_chunk(std::string_view data) {
  if (data.empty()) co_return !peer_gone();  // an empty chunk would end the body
  const beast::error_code ec = co_await write([&](auto& s, beast::error_code& e) -> asio::awaitable<void> {
    if (chunked_)
      co_await asio::async_write(s, http::make_chunk(asio::buffer(data.data(), data.size())), with_error(e));
    else
      co_await asio::async_write(s, asio::buffer(data.data(), data.size()), with_error(e));
  });
  if (ec) keep_alive_ = false;
  co_return !ec;
}

asio::awaitable<bool> Connection::end_stream() {
  if (!chunked_) co_return true;
  const beast::error_code ec = co_await write([&](auto& s, beast::error_code& e) -> asio::awaitable<void> {
    co_await asio::async_write(s, http::make_chunk_last(), with_error(e));
  });
  if (ec) keep_alive_ = false;
  co_return !ec;
}

HttpServer::HttpServer(HttpServerConfig config, HttpHandler handler, HttpErrorBody error_body)
    : config_(std::move(config)),
      handler_(std::move(handler)),
      error_body_(std::move(error_body)),
      ioc_(std::max(1, config_.io_threads)),
      acceptor_(ioc_),
      signals_(ioc_, SIGINT, SIGTERM),
      drain_timer_(ioc_) {
  if (config_.ssl_keyfile.empty() != config_.ssl_certfile.empty())
    fail("give both --ssl-keyfile and --ssl-certfile for HTTPS (got only {})",
         config_.ssl_keyfile.empty() ? "--ssl-certfile" : "--ssl-keyfile");
  if (config_.ssl_keyfile.empty()) return;
  tls_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  tls_->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                    asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  beast::error_code ec;
  tls_->use_certificate_chain_file(config_.ssl_certfile, ec);
  if (ec) fail_load(config_.ssl_certfile, "cannot use it as the TLS certificate chain (PEM): {}", ec.message());
  tls_->use_private_key_file(config_.ssl_keyfile, asio::ssl::context::pem, ec);
  if (ec) fail_load(config_.ssl_keyfile, "cannot use it as the TLS private key (PEM): {}", ec.message());
}

HttpServer::~HttpServer() = default;

void HttpServer::bind() {
  beast::error_code ec;
  asio::ip::address address = asio::ip::make_address(config_.host, ec);
  if (ec) {
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(config_.host, "", ec);
    if (ec || results.empty())
      fail("--host {}: not an IP address or a resolvable name ({})", config_.host, ec.message());
    address = results.begin()->endpoint().address();
  }
  const tcp::endpoint endpoint(address, config_.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("cannot listen on {}:{}: {}", config_.host, config_.port, ec.message());
  port_ = acceptor_.local_endpoint().port();
}

void HttpServer::run() {
  if (!acceptor_.is_open()) bind();
  signals_.async_wait([this](const beast::error_code& ec, int signal) {
    if (ec) return;
    spdlog::info("signal {}: draining running requests (a second signal stops at once)", signal);
    if (on_signal) on_signal(signal);
    begin_drain();
    signals_.async_wait([this](const beast::error_code& ec2, int) {
      if (ec2) return;
      spdlog::warn("second signal: stopping now");
      ioc_.stop();
    });
  });
  asio::co_spawn(ioc_, accept_loop(), asio::detached);
  std::vector<std::thread> threads;
  for (int i = 1; i < config_.io_threads; ++i) threads.emplace_back([this] { ioc_.run(); });
  ioc_.run();
  for (std::thread& t : threads) t.join();
}

void HttpServer::stop() {
  asio::post(ioc_, [this] { begin_drain(); });
}

void HttpServer::begin_drain() {
  if (draining_.exchange(true)) return;
  beast::error_code ec;
  acceptor_.close(ec);
  drain_deadline_ = std::chrono::steady_clock::now() + config_.drain_timeout;
  poll_drain();
}

void HttpServer::poll_drain() {
  const int64_t active = active_requests_.load();
  if (active == 0) {
    spdlog::info("no requests running; shutting down");
    ioc_.stop();  // idle keep-alive connections are dropped with the io_context
    return;
  }
  if (std::chrono::steady_clock::now() >= drain_deadline_) {
    spdlog::warn("drain timeout: {} requests still running; stopping", active);
    ioc_.stop();
    return;
  }
  drain_timer_.expires_after(std::chrono::milliseconds(50));
  drain_timer_.async_wait([this](const beast::error_code& ec) {
    if (!ec) poll_drain();
  });
}

asio::awaitable<void> HttpServer::accept_loop() {
  for (;;) {
    beast::error_code ec;
    // Each connection gets its own strand, so its coroutine and the callbacks posted to it never run at once.
    tcp::socket socket(asio::make_strand(ioc_));
    co_await acceptor_.async_accept(socket, with_error(ec));
    if (ec) {
      if (draining_ || !acceptor_.is_open()) co_return;
      // Out of file descriptors and similar: log, back off briefly, go on.
      spdlog::warn("accept failed: {}", ec.message());
      asio::steady_timer pause(ioc_, std::chrono::milliseconds(50));
      co_await pause.async_wait(with_error(ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto executor = socket.get_executor();
    const bool over_capacity = open_connections_.load() >= config_.max_connections;
    asio::co_spawn(executor, session(std::move(socket), over_capacity), asio::detached);
  }
}

template <typename Stream>
asio::awaitable<beast::error_code> HttpServer::read_request(Stream& stream, beast::tcp_stream& lowest,
                                                            beast::flat_buffer& buffer,
                                                            http::request_parser<http::string_body>& parser) {
  beast::error_code ec;
  if (buffer.size() == 0) {  // keep-alive: the next request's first bytes
    lowest.expires_after(config_.idle_timeout);
    const size_t n = co_await stream.async_read_some(buffer.prepare(4096), with_error(ec));
    buffer.commit(n);
    if (ec) co_return ec;
  }
  lowest.expires_after(config_.header_timeout);
  co_await http::async_read_header(stream, buffer, parser, with_error(ec));
  if (!ec && !parser.is_done()) {
    lowest.expires_after(config_.body_timeout);
    co_await http::async_read(stream, buffer, parser, with_error(ec));
  }
  lowest.expires_never();
  co_return ec;
}

// A request we cannot take: say why (413, 400), then close (the rest of its bytes are unread).
template <typename Stream>
asio::awaitable<void> HttpServer::answer_unreadable(Stream& stream, beast::tcp_stream& lowest,
                                                    const beast::error_code& ec) {
  const bool too_big = ec == http::error::body_limit || ec == http::error::header_limit;
  const int status = too_big ? 413 : 400;
  const std::string message =
      ec == http::error::body_limit
          ? fmt::format("the request body is larger than the limit of {} bytes", config_.max_body_bytes)
          : fmt::format("cannot parse the HTTP request: {}", ec.message());
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::server, "minfer");
  res.set(http::field::content_type, "application/json");
  res.keep_alive(false);
  res.body() = error_body_(status, message);
  res.prepare_payload();
  beast::error_code write_ec;
  lowest.expires_after(config_.write_timeout);
  co_await http::async_write(stream, res, with_error(write_ec));
}

asio::awaitable<void> HttpServer::session(tcp::socket socket, bool over_capacity) {
  ++open_connections_;
  if (on_connection_open) on_connection_open();
  if (!tls_) {
    beast::tcp_stream stream(std::move(socket));
    co_await serve_requests(stream, stream, nullptr, over_capacity);
  } else {
    TlsStream tls(std::move(socket), *tls_);
    beast::tcp_stream& lowest = beast::get_lowest_layer(tls);
    beast::error_code ec;
    lowest.expires_after(config_.header_timeout);
    co_await tls.async_handshake(asio::ssl::stream_base::server, with_error(ec));
    lowest.expires_never();
    if (ec)
      spdlog::debug("TLS handshake failed: {}", ec.message());  // a plain-HTTP client, a refused certificate, ...
    else
      co_await serve_requests(tls, lowest, &tls, over_capacity);
  }
  --open_connections_;
  if (on_connection_close) on_connection_close();
}

template <typename Stream>
asio::awaitable<void> HttpServer::serve_requests(Stream& stream, beast::tcp_stream& lowest, TlsStream* tls,
                                                 bool over_capacity) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(config_.max_body_bytes);
    parser.header_limit(64 * 1024);
    const beast::error_code ec = co_await read_request(stream, lowest, buffer, parser);
    if (ec) {
      // A client gone, idle past the keep-alive timeout, or slow past the header/body timeout (the stream is
      // closed then): nothing to answer.
      if (!is_disconnect(ec) && ec != asio::ssl::error::stream_truncated)
        co_await answer_unreadable(stream, lowest, ec);
      break;
    }
    const HttpRequest& request = parser.get();
    ++active_requests_;
    bool keep_alive = false;
    {
      Connection connection(lowest, tls, request, draining_.load());
      try {
        if (draining_) {
          co_await connection.send(http::status::service_unavailable, error_body_(503, "the server is shutting down"),
                                   "application/json");
        } else if (over_capacity) {
          connection.add_header("Retry-After", "1");
          co_await connection.send(
              http::status::service_unavailable,
              error_body_(503, fmt::format("the server has {} open connections (--max-connections): retry shortly",
                                           config_.max_connections)),
              "application/json");
        } else {
          co_await handler_(request, connection);
        }
      } catch (const std::exception& e) {
        // Handlers answer their own errors; reaching here is a bug, and the connection's state is unknown.
        spdlog::error("request handler failed: {}", e.what());
      }
      keep_alive = connection.keep_alive() && !connection.peer_gone() && !draining_ && !over_capacity;
    }
    --active_requests_;
    if (!keep_alive) break;
  }
  beast::error_code ec;
  if (tls) {
    lowest.expires_after(std::chrono::seconds(5));
    co_await tls->async_shutdown(with_error(ec));  // close_notify; a client that does not answer is cut
  }
  lowest.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ec);
}

}  // namespace minfer::server
