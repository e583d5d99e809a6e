// The HTTP API's routing table: method and path to a small handler function;
// a path pattern may end in one "{param}" segment ("/v1/models/{id}").
// HEAD runs the GET route of its path (the head alone goes out). Unknown
// paths answer 404 not_found, known paths with another method 405
// with Allow.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gateway/http/http_message.h"

namespace k3::gateway {

// Not thread-safe while routes are added; route() is thread-safe after.
class Router {
 public:
  // `param` is the "{...}" segment's value ("" for a pattern without one).
  using Route = std::function<void(const HttpRequest&, const std::shared_ptr<Exchange>&,
                                   const std::string& param)>;

  void add(std::string method, std::string pattern, Route route);
  // Runs the matching route, else answers 404 or 405.
  void route(const HttpRequest& req, const std::shared_ptr<Exchange>& ex) const;
  // The methods some route takes at this path ("GET, POST"); "" for none.
  std::string allowed(const std::string& path) const;

 private:
  struct Entry {
    std::string method;
    std::string prefix;  // the pattern up to "{", or all of it
    bool has_param = false;
  };
  bool matches(const Entry& e, const std::string& path, std::string* param) const;

  std::vector<std::pair<Entry, Route>> routes_;
};

}  // namespace k3::gateway
