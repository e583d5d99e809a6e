// A daemon's unix socket and the directory made for it get our modes, not the
// umask's: under umask 000 the socket is still 0660 (the service's user and
// group), so no other local user reaches SetPlacement or Generate.
#include "shared/rpc/server.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "k3serve/v1/engine.grpc.pb.h"
#include "tests/test_util.h"

namespace k3::rpc {
namespace {

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Sets the process umask for one scope.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t m) : old_(::umask(m)) {}
  ~ScopedUmask() { ::umask(old_); }

 private:
  mode_t old_;
};

TEST(Server, UnixSocketModeIgnoresTheUmask) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("run/k3serve");
  const std::string path = dir + "/engined.sock";
  k3serve::v1::EngineService::Service service;  // a server needs one
  StatusOr<RunningServer> server;
  {
    ScopedUmask open_umask(0);
    server = start_server("unix:" + path, {&service});
  }
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(mode_of(path) & 0777, kSocketMode);
  EXPECT_EQ(mode_of(dir), kSocketDirMode);
  EXPECT_EQ(::umask(022), ::umask(022)) << "the umask is restored";
  server->server->Shutdown();
}

TEST(Server, UnixSocketModeUnderATightUmask) {
  testing::TempDir tmp;
  const std::string path = tmp.file("engined.sock");
  k3serve::v1::EngineService::Service service;  // a server needs one
  StatusOr<RunningServer> server;
  {
    ScopedUmask tight(0077);
    server = start_server("unix:" + path, {&service});
    EXPECT_EQ(::umask(0077), 0077) << "start_server puts the caller's umask back";
  }
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(mode_of(path) & 0777, kSocketMode) << "the group still connects";
  server->server->Shutdown();
}

}  // namespace
}  // namespace k3::rpc
