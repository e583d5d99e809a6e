// gateway/core/topology_file.h: the topology file's entries, local and
// remote, and the errors naming what is wrong.
#include "gateway/core/topology_file.h"

#include <gtest/gtest.h>

namespace k3::gateway {
namespace {

TEST(Topology, ParsesEntriesAndNamesWhatIsWrong) {
  auto t = parse_topology(R"({"expertd":[{"name":"a","address":"unix:/x"},{"address":"h:1"}]})",
                          "topo.json");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->expertd.size(), 2u);
  EXPECT_EQ(t->expertd[1].name, "h:1");
  EXPECT_EQ(t->expertd[0].segment, "");
  EXPECT_TRUE(t->remote_expertd.empty());
  // An expertd with --segment-dir: its DIR/NAME path, checked against Describe.
  auto p = parse_topology(R"({"expertd":[{"address":"unix:/x","segment":"/mnt/huge/k3-nvme0"}]})",
                          "topo.json");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->expertd[0].segment, "/mnt/huge/k3-nvme0");
  struct Bad {
    const char* text;
    const char* says;
  };
  for (const Bad& b : {Bad{"{", "not valid JSON"}, Bad{"[]", "expected"},
                       Bad{R"({"expertd":[{"name":"a"}]})", "expertd[0].address"},
                       Bad{R"({"expertd":[1]})", "expertd[0] must be an object"},
                       Bad{R"({"expertd":[{"address":"a"},{"address":"a"}]})", "repeats"},
                       Bad{R"({"expertd":[{"address":"a","segment":"x/../y"}]})", ".segment"},
                       Bad{R"({"expertd":[{"address":"a","segment":7}]})", ".segment"},
                       Bad{R"({"expertd":[{"address":"a","segmnet":"x"}]})",
                           "expertd[0]: unknown field \"segmnet\""},
                       Bad{R"({"expertd":[],"remote":[]})", "unknown field \"remote\""},
                       Bad{R"({"expertd":[{"address":"a","segment":"x","segment":"y"}]})",
                           "duplicate key 'segment' (at /expertd/0)"}}) {
    auto r = parse_topology(b.text, "topo.json");
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("topo.json"), std::string::npos);
  }
}

TEST(Topology, RemoteHostsAreCheckedFieldByField) {
  auto t = parse_topology(R"({"expertd": [{"name": "nvme0", "address": "unix:/x"}],
    "remote_expertd": [
      {"name": "storage0", "address": "10.0.0.2:7070", "tls_ca": "/etc/k3serve/ca.pem",
       "tls_cert": "/etc/k3serve/engined.pem", "tls_key": "/etc/k3serve/engined.key",
       "auth_token_file": "/etc/k3serve/remote.token"},
      {"address": "127.0.0.1:7071", "insecure": true}]})",
                          "topo.json");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->remote_expertd.size(), 2u);
  const RemoteExpertdEntry& a = t->remote_expertd[0];
  EXPECT_EQ(a.name, "storage0");
  EXPECT_EQ(a.address, "10.0.0.2:7070");
  EXPECT_EQ(a.tls_ca, "/etc/k3serve/ca.pem");
  EXPECT_EQ(a.tls_cert, "/etc/k3serve/engined.pem");
  EXPECT_EQ(a.tls_key, "/etc/k3serve/engined.key");
  EXPECT_EQ(a.auth_token_file, "/etc/k3serve/remote.token");
  EXPECT_FALSE(a.insecure);
  EXPECT_EQ(t->remote_expertd[1].name, "127.0.0.1:7071");
  EXPECT_TRUE(t->remote_expertd[1].insecure);
  // Remote hosts alone are a topology too.
  auto only = parse_topology(R"({"remote_expertd": [{"name": "s", "address": "h:1",
    "insecure": true}]})",
                             "topo.json");
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_TRUE(only->expertd.empty());
  struct Bad {
    const char* entry;
    const char* says;
  };
  for (const Bad& b : {
           Bad{R"(7)", "remote_expertd[0] must be an object"},
           Bad{R"({"name": "s"})", "remote_expertd[0].address is required"},
           Bad{R"({"address": 5, "insecure": true})", ".address must be a non-empty string"},
           Bad{R"({"address": "nohost", "insecure": true})", ".address 'nohost' is not HOST:PORT"},
           Bad{R"({"address": "h:0", "insecure": true})", "is not HOST:PORT"},
           Bad{R"({"address": "h:70000", "insecure": true})", "is not HOST:PORT"},
           Bad{R"({"address": "unix:/run/x.sock", "insecure": true})", "is not HOST:PORT"},
           Bad{R"({"name": "a b", "address": "h:1", "insecure": true})", ".name 'a b'"},
           Bad{R"({"name": "a=b", "address": "h:1", "insecure": true})", ".name 'a=b'"},
           Bad{R"({"address": "h:1"})", ".tls_ca is required"},
           Bad{R"({"address": "h:1", "tls_ca": "/ca.pem"})", ".auth_token_file is required"},
           Bad{R"({"address": "h:1", "tls_ca": "ca.pem", "auth_token_file": "/t"})",
               ".tls_ca must be an absolute path"},
           Bad{R"({"address": "h:1", "tls_ca": "/ca.pem", "auth_token_file": "t"})",
               ".auth_token_file must be an absolute path"},
           Bad{R"({"address": "h:1", "tls_ca": "/c", "auth_token_file": "/t", "tls_cert": "/p"})",
               "tls_cert and tls_key go together"},
           Bad{R"({"address": "h:1", "tls_ca": "/ca.pem", "insecure": true})",
               "insecure and tls_* exclude each other"},
           Bad{R"({"address": "h:1", "insecure": "yes"})", ".insecure must be true or false"},
           Bad{R"({"address": "h:1", "insecure": true, "replicas": 2})",
               "unknown field \"replicas\""},
           Bad{R"({"address": "h:1", "tls_ca": "", "auth_token_file": "/t"})",
               ".tls_ca must be a non-empty string"},
       }) {
    const std::string text = std::string(R"({"remote_expertd": [)") + b.entry + "]}";
    auto r = parse_topology(text, "topo.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status() << " " << text;
    EXPECT_NE(r.status().message().find("topo.json"), std::string::npos);
  }
  // Names and addresses are distinct across both lists.
  for (const Bad& b : {Bad{R"({"remote_expertd": [{"name": "a", "address": "h:1", "insecure": true},
                               {"name": "a", "address": "h:2", "insecure": true}]})",
                           "remote_expertd[1] repeats"},
                       Bad{R"({"remote_expertd": [{"name": "a", "address": "h:1", "insecure": true},
                               {"name": "b", "address": "h:1", "insecure": true}]})",
                           "remote_expertd[1] repeats"},
                       Bad{R"({"expertd": [{"name": "a", "address": "unix:/x"}],
            "remote_expertd": [{"name": "a", "address": "h:1", "insecure": true}]})",
                           "remote_expertd[0].name 'a' names an expertd"}}) {
    auto r = parse_topology(b.entry, "topo.json");
    ASSERT_FALSE(r.ok()) << b.entry;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace k3::gateway
