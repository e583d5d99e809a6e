// Whether an HTTP client is still connected. cpp-httplib 0.11 gives a handler
// the connection's addresses but not its socket; this finds the socket among
// the process's descriptors by its address pair once, then asks it (without
// reading: MSG_PEEK) whether the peer has closed. The descriptor stays the
// connection's for as long as the handler runs: httplib closes it after.
#pragma once

#include <functional>
#include <string>

namespace k3::gateway {

// A check that returns false once the client at remote:port (connected to
// local:port) has gone away; always true when the socket cannot be found.
std::function<bool()> watch_peer(const std::string& local_addr, int local_port,
                                 const std::string& remote_addr, int remote_port);

}  // namespace k3::gateway
