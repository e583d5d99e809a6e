// A minimal HTTP/1.1 client over a raw socket, for tests that must see
// exactly what happened on the wire: a refused connection, a response cut
// mid-body, a client that hangs up on purpose. One request per connection.
#pragma once

#include <functional>
#include <string>

namespace k3::faults_test {

struct HttpReply {
  int status = 0;         // 0: no status line arrived
  std::string body;       // decoded (chunked transfer encoding undone)
  bool complete = false;  // the whole body arrived (length or last chunk)
  std::string error;      // connect/read failure, empty when none
};

// Sends `method path` with `body` (JSON) to 127.0.0.1:`port`. `on_body`, if
// given, sees the decoded body so far after each read; returning false hangs
// up at once (the reply is then incomplete). `timeout_s` bounds each wait.
HttpReply http_exchange(int port, const std::string& method, const std::string& path,
                        const std::string& body, double timeout_s,
                        const std::function<bool(const std::string&)>& on_body = nullptr);

// Connects, sends the request whole and closes without reading: a client
// that went away. False when the connection or the write failed.
bool http_send_and_hang_up(int port, const std::string& path, const std::string& body);

}  // namespace k3::faults_test
