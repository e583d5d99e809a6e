// `k3ctl certs`: a private CA and the certificates TLS between our processes
// needs (the gateway's public APIs, remote expertd and the engined that use
// them), made with OpenSSL's library, no openssl command line needed.
//
//   k3ctl certs --out DIR [--hosts NAME,IP,...] [--days N] [--force]
//
// Writes DIR/ca.pem + ca.key (the CA: keep ca.key offline once the
// certificates are made), DIR/server.pem + server.key (names and addresses
// from --hosts in subjectAltName; localhost and 127.0.0.1 are always in), and
// DIR/client.pem + client.key (for mutual TLS). Keys are ECDSA P-256, written
// mode 0600; existing files are refused unless --force.
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "shared/base/file.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {
namespace {

namespace fs = std::filesystem;

struct CertArgs {
  std::string out;
  std::vector<std::string> hosts;
  int days = 825;
  bool force = false;
};

using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;

std::string openssl_error(const std::string& what) {
  char buf[256] = "";
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  return what + " failed (" + buf + ")";
}

StatusOr<Key> new_key() {
  Key k(EVP_EC_gen("P-256"), EVP_PKEY_free);
  if (!k) return absl::InternalError(openssl_error("EC key generation"));
  return k;
}

bool is_ip(const std::string& h) {
  unsigned char buf[16];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

Status add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return absl::InvalidArgumentError(openssl_error("extension " + value));
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok ? absl::OkStatus() : absl::InternalError(openssl_error("X509_add_ext"));
}

// A certificate for `key`, signed by `ca_key` (self-signed when ca is null).
StatusOr<Cert> make_cert(const std::string& cn, EVP_PKEY* key, X509* ca, EVP_PKEY* ca_key, int days,
                         const std::string& kind, const std::string& san) {
  Cert c(X509_new(), X509_free);
  X509_set_version(c.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(c.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), static_cast<long>(days) * 86400);
  X509_set_pubkey(c.get(), key);
  X509_NAME* name = X509_get_subject_name(c.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("k3serve"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* issuer = ca ? ca : c.get();
  X509_set_issuer_name(c.get(), X509_get_subject_name(issuer));
  if (kind == "ca") {
    K3_RETURN_IF_ERROR(
        add_ext(c.get(), issuer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    K3_RETURN_IF_ERROR(add_ext(c.get(), issuer, NID_key_usage, "critical,keyCertSign,cRLSign"));
  } else {
    K3_RETURN_IF_ERROR(add_ext(c.get(), issuer, NID_basic_constraints, "critical,CA:FALSE"));
    K3_RETURN_IF_ERROR(add_ext(c.get(), issuer, NID_key_usage, "critical,digitalSignature"));
    K3_RETURN_IF_ERROR(add_ext(c.get(), issuer, NID_ext_key_usage,
                               kind == "server" ? "serverAuth" : "clientAuth"));
    if (!san.empty()) K3_RETURN_IF_ERROR(add_ext(c.get(), issuer, NID_subject_alt_name, san));
  }
  K3_RETURN_IF_ERROR(add_ext(c.get(), issuer, NID_subject_key_identifier, "hash"));
  if (X509_sign(c.get(), ca_key ? ca_key : key, EVP_sha256()) == 0)
    return absl::InternalError(openssl_error("X509_sign"));
  return c;
}

Status write_pem(const std::string& path, bool secret, const std::function<int(FILE*)>& fn) {
  const std::string tmp = path + ".partial";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return absl::PermissionDeniedError(cat(tmp, ": ", std::strerror(errno)));
  if (secret) ::fchmod(fileno(f), 0600);
  const int ok = fn(f);
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::remove(tmp.c_str());
    return absl::InternalError(openssl_error("writing " + path));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return absl::InternalError(cat("rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

Status run_certs(const CertArgs& a) {
  const std::vector<std::string> names = {"ca.pem",     "ca.key",     "server.pem",
                                          "server.key", "client.pem", "client.key"};
  std::error_code ec;
  fs::create_directories(a.out, ec);
  if (ec) return absl::PermissionDeniedError(cat(a.out, ": ", ec.message()));
  for (const std::string& n : names)
    if (fs::exists(fs::path(a.out) / n) && !a.force)
      return absl::AlreadyExistsError(cat(a.out, "/", n, " exists; --force makes new ones"));
  std::string san = "DNS:localhost,IP:127.0.0.1,IP:::1";
  for (const std::string& h : a.hosts) {
    if (h.empty() || h.find_first_of(", \t\n") != std::string::npos)
      return absl::InvalidArgumentError(cat("--hosts: '", h, "' is not a host name or address"));
    san += (is_ip(h) ? ",IP:" : ",DNS:") + h;
  }
  K3_ASSIGN_OR_RETURN(Key ca_key, new_key());
  K3_ASSIGN_OR_RETURN(Cert ca,
                      make_cert("k3serve CA", ca_key.get(), nullptr, nullptr, a.days, "ca", ""));
  K3_ASSIGN_OR_RETURN(Key server_key, new_key());
  const std::string server_cn = a.hosts.empty() ? "localhost" : a.hosts.front();
  K3_ASSIGN_OR_RETURN(Cert server, make_cert(server_cn, server_key.get(), ca.get(), ca_key.get(),
                                             a.days, "server", san));
  K3_ASSIGN_OR_RETURN(Key client_key, new_key());
  K3_ASSIGN_OR_RETURN(Cert client, make_cert("k3serve client", client_key.get(), ca.get(),
                                             ca_key.get(), a.days, "client", ""));
  const std::string d = a.out + "/";
  auto key_writer = [](EVP_PKEY* k) {
    return
        [k](FILE* f) { return PEM_write_PrivateKey(f, k, nullptr, nullptr, 0, nullptr, nullptr); };
  };
  auto cert_writer = [](X509* c) { return [c](FILE* f) { return PEM_write_X509(f, c); }; };
  K3_RETURN_IF_ERROR(write_pem(d + "ca.key", true, key_writer(ca_key.get())));
  K3_RETURN_IF_ERROR(write_pem(d + "ca.pem", false, cert_writer(ca.get())));
  K3_RETURN_IF_ERROR(write_pem(d + "server.key", true, key_writer(server_key.get())));
  K3_RETURN_IF_ERROR(write_pem(d + "server.pem", false, cert_writer(server.get())));
  K3_RETURN_IF_ERROR(write_pem(d + "client.key", true, key_writer(client_key.get())));
  K3_RETURN_IF_ERROR(write_pem(d + "client.pem", false, cert_writer(client.get())));
  std::printf(
      "%s\n",
      nlohmann::json(
          {{"out", a.out}, {"files", names}, {"server_subject_alt_names", san}, {"days", a.days}})
          .dump()
          .c_str());
  return absl::OkStatus();
}

void add_certs_command(CLI::App& app) {
  auto a = std::make_shared<CertArgs>();
  auto* cmd = app.add_subcommand(
      "certs", "make a private CA, a server and a client certificate for TLS between hosts");
  cmd->add_option("--out", a->out, "directory for ca.pem, server.pem/.key, client.pem/.key")
      ->required();
  cmd->add_option("--hosts", a->hosts,
                  "server names and addresses, comma-separated (localhost and 127.0.0.1 always)")
      ->delimiter(',');
  cmd->add_option("--days", a->days, "validity in days (default 825)")->check(CLI::Range(1, 36500));
  cmd->add_flag("--force", a->force, "replace existing files");
  cmd->callback([a] {
    if (Status s = run_certs(*a); !s.ok()) fail(msg(s));
  });
}

const CommandRegistrar kCerts(add_certs_command);

}  // namespace
}  // namespace k3::tools
