// HTTP/1.1 on Boost.Beast over Asio, one C++20 coroutine per connection. The server does the framing
// (parsing with a body limit, keep-alive, chunked streaming, timeouts, graceful drain on SIGTERM/SIGINT);
// what a request means is the handler's business (server/router.h).
//
// Threading: `io_threads` threads run one io_context; each connection's coroutine runs on its own strand,
// so a handler never races with itself, and other threads (the engine's) hand it work with asio::post.
#pragma once

#include <atomic>
// clang-format off
#include "server/asio.h"
// clang-format on
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace minfer::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

using HttpRequest = http::request<http::string_body>;
// A connection's bytes: plain TCP, or TLS over it (--ssl-keyfile / --ssl-certfile).
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

struct HttpServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0 = any free port (see HttpServer::port())
  int io_threads = 1;
  uint64_t max_body_bytes = 8u << 20;
  // A connection is closed when it holds still too long: waiting between requests (keep-alive), sending a
  // request's header, sending its body, or not reading a response (one write).
  std::chrono::seconds idle_timeout{120};
  std::chrono::seconds header_timeout{15};
  std::chrono::seconds body_timeout{60};
  std::chrono::seconds write_timeout{120};
  std::chrono::seconds drain_timeout{300};  // on SIGTERM: longest wait for running requests
  // Open connections above which a new one gets 503 with Retry-After (after its request is read) and is closed.
  int64_t max_connections = 512;
  // HTTPS: a PEM private key and certificate chain (both or neither); the TLS handshake has header_timeout.
  std::string ssl_keyfile, ssl_certfile;
};

// One request's side of its connection, handed to the handler: write a whole response, or stream one in
// chunks, and learn when the client goes away.
class Connection {
 public:
  // tls: the TLS layer over `stream` on an HTTPS connection (null: plain HTTP).
  Connection(beast::tcp_stream& stream, TlsStream* tls, const HttpRequest& request, bool draining);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  asio::awaitable<void> send(http::status status, std::string body, std::string_view content_type);
  // A header every response of this request carries (CORS, Retry-After); call before send or start_stream.
  void add_header(std::string name, std::string value) { headers_.emplace_back(std::move(name), std::move(value)); }

  // Streaming (chunked transfer encoding; HTTP/1.0 clients get a body that ends with the connection).
  // Each returns false once a write failed: the client is gone and the handler should stop.
  asio::awaitable<bool> start_stream(std::string_view content_type);
  asio::awaitable<bool> send_chunk(std::string_view data);
  asio::awaitable<bool> end_stream();

  // Calls on_gone (on this connection's strand) when the client closes or resets the connection before the
  // response is complete. Data the client sends meanwhile (a pipelined request) is left to be read later.
  void watch_peer(std::function<void()> on_gone);
  bool peer_gone() const;

  asio::any_io_executor executor() const;
  bool keep_alive() const { return keep_alive_; }
  int status() const { return status_; }

 private:
  struct PeerWatch;
  // Runs one write, op(stream, ec), on the TLS layer or the TCP stream, within the write timeout; its error.
  template <typename Op>
  asio::awaitable<beast::error_code> write(Op op);
  beast::tcp_stream& stream_;
  TlsStream* tls_;
  unsigned version_;
  bool keep_alive_;
  bool chunked_ = true;
  int status_ = 0;
  std::shared_ptr<PeerWatch> watch_;
  std::vector<std::pair<std::string, std::string>> headers_;
};

using HttpHandler = std::function<asio::awaitable<void>(const HttpRequest&, Connection&)>;
// The body of an error the server itself answers (413, 400 for unparsable HTTP, 503 while draining).
using HttpErrorBody = std::function<std::string(int status, const std::string& message)>;

class HttpServer {
 public:
  HttpServer(HttpServerConfig config, HttpHandler handler, HttpErrorBody error_body);
  ~HttpServer();

  // Binds and listens (throws minfer::Error naming the address on failure); port() is then the real port.
  void bind();
  uint16_t port() const { return port_; }

  // Serves until SIGTERM/SIGINT (or stop()): then stops accepting, lets running requests finish (new
  // requests on open connections get 503), and returns. A second signal stops at once.
  void run();
  void stop();  // thread-safe: begins the drain as a signal would

  // Connection open/close hooks (for metrics).
  // Called at the first SIGINT/SIGTERM, before draining starts (null: nothing).
  std::function<void(int signal)> on_signal;
  std::function<void()> on_connection_open;
  std::function<void()> on_connection_close;

 private:
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> session(asio::ip::tcp::socket socket, bool over_capacity);
  // The requests of one connection, in turn, over `stream` (the TLS layer or the TCP stream itself).
  template <typename Stream>
  asio::awaitable<void> serve_requests(Stream& stream, beast::tcp_stream& lowest, TlsStream* tls, bool over_capacity);
  // Reads the next request into `parser` within the idle, header and body timeouts; the error of the read.
  template <typename Stream>
  asio::awaitable<beast::error_code> read_request(Stream& stream, beast::tcp_stream& lowest, beast::flat_buffer& buffer,
                                                  http::request_parser<http::string_body>& parser);
  template <typename Stream>
  asio::awaitable<void> answer_unreadable(Stream& stream, beast::tcp_stream& lowest, const beast::error_code& ec);
  void begin_drain();
  void poll_drain();

  HttpServerConfig config_;
  std::unique_ptr<asio::ssl::context> tls_;  // null: plain HTTP
  HttpHandler handler_;
  HttpErrorBody error_body_;
  asio::io_context ioc_;
  asio::ip::tcp::acceptor acceptor_;
  asio::signal_set signals_;
  asio::steady_timer drain_timer_;
  std::chrono::steady_clock::time_point drain_deadline_;
  uint16_t port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> open_connections_{0};
  std::atomic<int64_t> active_requests_{0};
};

}  // namespace minfer::server
