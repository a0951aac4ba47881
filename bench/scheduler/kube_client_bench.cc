// The API client's cost per request over TLS with a client certificate (as gpushare-scheduler and
// gpushare-node talk to kube-apiserver), against the API-server double serving HTTPS: on a kept
// connection, and on a new connection each time (what a bind paid when the connection pool was
// smaller than the binds in flight, and what every request of a burst pays after its
// connections went idle), and on the shared connections of kube/http_mux.h. CPU time is the
// process's (client and double together); docs/benchmarks.md, "API client".
#include <benchmark/benchmark.h>

#include "kube/client.h"
#include "kube/errors.h"
#include "tests/fakes/apiserver/fake_apiserver.h"
#include "tests/kube/test_util.h"

namespace gpushare::kube {
namespace {

// arg 0: a kept connection of the handle pool (each request on its own curl multi, as watches
// still run); 1: a new connection per request; 2: the shared multi handle every unary request
// now runs on (kube/http_mux.h: the request handed to the mux's thread and back; HTTP/1.1 to
// the double, so one kept connection).
void BM_TlsRequest(benchmark::State& state) {
  testing::TempDir dir;
  const testing::TlsMaterial tls = testing::MakeTls(dir);
  if (!tls.ok) {
    state.SkipWithError("openssl command-line tool absent");
    return;
  }
  fakes::FakeApiServerOptions o;
  o.tls_cert_file = tls.server_crt;
  o.tls_key_file = tls.server_key;
  o.tls_client_ca_file = tls.ca_crt;
  fakes::FakeApiServer server(o);
  if (!server.Start().ok()) {
    state.SkipWithError("the API-server double did not start");
    return;
  }
  ClientConfig c;
  c.ca_pem = tls.Pem(tls.ca_crt);
  c.client_cert_pem = tls.Pem(tls.client_crt);
  c.client_key_pem = tls.Pem(tls.client_key);
  ClientOptions co;
  co.qps = 0;
  co.max_idle_connections = state.range(0) == 1 ? 0 : 16;
  co.share_connections = state.range(0) == 2;
  const std::shared_ptr<Client> client = testing::MakeClient(server.url(), co, c);
  for (auto _ : state) {
    Result<Pod> p = client->GetPod("default", "missing");
    if (!IsNotFound(p.status())) {
      state.SkipWithError(p.status().ToString().c_str());
      return;
    }
  }
}
// 500 requests each: the double closes a connection after 1,000 (keep_alive_max_count). CPU time
// is the whole process's: the client's threads (the mux's included) and the double's.
BENCHMARK(BM_TlsRequest)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(500)
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpushare::kube

BENCHMARK_MAIN();
