// fake-apiserver: the API-server double (fake_apiserver.h) as a standalone process, for
// integration tests that start the real gpushare binaries against it. Test hooks are served
// over HTTP under /_fake/ (objects, faults, requests, compact, close-watches, bookmarks, state).
//
//   fake-apiserver [--listen 127.0.0.1:0] [--port-file F] [--token T]... [--tls-cert C --tls-key K
//                  [--client-ca CA]] [--load objects.json] [--history-limit N]
//                  [--bookmark-interval-ms N] [--watch-timeout-s N]
//
// Prints one line `fake-apiserver listening url=<url>` on stdout once it serves, writes the
// port to --port-file if given, and exits cleanly on SIGINT/SIGTERM.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/fakes/apiserver/fake_apiserver.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) {
  g_stop = 1;
}

}  // namespace

int main(int argc, char** argv) {
  using gpushare::fakes::FakeApiServer;
  using gpushare::fakes::FakeApiServerOptions;
  CLI::App app{"API-server double for gpushare tests"};
  std::string listen = "127.0.0.1:0", port_file, load_file;
  FakeApiServerOptions o;
  o.test_endpoints = true;
  int64_t bookmark_ms = 60000;
  app.add_option("--listen", listen, "host:port (port 0 picks a free one)");
  app.add_option("--port-file", port_file, "write the chosen port here");
  app.add_option("--token", o.tokens,
                 "accepted bearer token (repeatable; none: no authentication)");
  app.add_option("--tls-cert", o.tls_cert_file, "serve HTTPS with this certificate (PEM)");
  app.add_option("--tls-key", o.tls_key_file, "private key for --tls-cert (PEM)");
  app.add_option("--client-ca", o.tls_client_ca_file,
                 "require client certificates signed by this CA");
  app.add_option("--load", load_file,
                 "JSON file with objects to create: an object, a list or {\"items\":[...]}");
  app.add_option("--history-limit", o.history_limit, "watch events kept per resource");
  app.add_option("--bookmark-interval-ms", bookmark_ms, "interval between BOOKMARK events");
  app.add_option("--watch-timeout-s", o.default_watch_timeout_seconds,
                 "watch timeout when the client sets none");
  CLI11_PARSE(app, argc, argv);
  o.bookmark_interval = std::chrono::milliseconds(bookmark_ms);
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    std::cerr << "fake-apiserver: --listen: want host:port, got \"" << listen << "\"\n";
    return 2;
  }
  o.host = listen.substr(0, colon);
  try {
    o.port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    std::cerr << "fake-apiserver: --listen: bad port in \"" << listen << "\"\n";
    return 2;
  }
  FakeApiServer server(o);
  if (!load_file.empty()) {
    std::ifstream in(load_file);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (!in || j.is_discarded()) {
      std::cerr << "fake-apiserver: --load " << load_file << ": not readable JSON\n";
      return 2;
    }
    nlohmann::json items =
        j.is_array()
            ? j
            : (j.is_object() && j.contains("items") ? j["items"] : nlohmann::json::array({j}));
    for (const nlohmann::json& obj : items) {
      auto r = gpushare::fakes::ResourceFromKind(obj.is_object() ? obj.value("kind", "") : "");
      if (!r) {
        std::cerr << "fake-apiserver: --load " << load_file
                  << ": object without kind Pod, Node or Event\n";
        return 2;
      }
      server.Upsert(*r, obj);
    }
  }
  gpushare::Status s = server.Start();
  if (!s.ok()) {
    std::cerr << "fake-apiserver: " << s.ToString() << "\n";
    return 1;
  }
  if (!port_file.empty()) {
    std::ofstream pf(port_file + ".tmp");
    pf << server.port() << "\n";
    pf.close();
    std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  }
  std::cout << "fake-apiserver listening url=" << server.url() << std::endl;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.Stop();
  return 0;
}
