// kubeconfig_text.h: the kubeconfig the tests hand a binary or client to reach the API-server
// double (plain HTTP, no credentials).
#pragma once

#include <string>

namespace gpushare::fakes {

inline std::string PlainKubeconfig(const std::string& server) {
  return "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server +
         "\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: c\n  context: {cluster: c, "
         "user: u}\ncurrent-context: c\n";
}

}  // namespace gpushare::fakes
