// cuda-replay: replays a recorded cuGetProcAddress sequence the way the CUDA 13.0 runtime issues
// it: dlopen("libcuda.so.1"), dlsym(handle, "cuGetProcAddress_v2"), the empty probe, then
// cuGetProcAddress@12000 fetched through itself and every recorded (symbol, version, flags)
// request made through that pointer. For each request it prints
//   <symbol> <version> <flags> <CUresult> <status> <library file name> <symbol at the address>
// (dladdr of the returned pointer; "-" when NULL), so a test can tell which library and which ABI
// variant each request reached. Usage: cuda-replay <sequence file>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <fstream>
#include <sstream>
#include <string>

using GetProcV2 = int (*)(const char*, void**, int, uint64_t, int*);

static void Describe(void* p, std::string* lib, std::string* sym) {
  Dl_info info;
  if (p == nullptr || dladdr(p, &info) == 0) {
    *lib = "-";
    *sym = "-";
    return;
  }
  const char* base = info.dli_fname != nullptr ? strrchr(info.dli_fname, '/') : nullptr;
  *lib = base != nullptr ? base + 1 : (info.dli_fname != nullptr ? info.dli_fname : "-");
  *sym = info.dli_sname != nullptr && info.dli_saddr == p ? info.dli_sname : "?";
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: cuda-replay <sequence file>\n");
    return 2;
  }
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == nullptr) {
    fprintf(stderr, "cuda-replay: %s\n", dlerror());
    return 2;
  }
  auto first = reinterpret_cast<GetProcV2>(dlsym(h, "cuGetProcAddress_v2"));
  if (first == nullptr) return 2;
  std::string lib, sym;
  Describe(reinterpret_cast<void*>(first), &lib, &sym);
  printf("dlsym:cuGetProcAddress_v2 0 0 0 0 %s %s\n", lib.c_str(), sym.c_str());
  GetProcV2 gpa = first;
  std::ifstream in(argv[1]);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string name;
    int version = 0;
    uint64_t flags = 0;
    if (line.empty() || line[0] == ' ')
      name = "";  // the runtime's empty probe
    else
      ls >> name;
    if (name.empty()) {
      std::istringstream rest(line);
      rest >> version >> flags;
    } else {
      ls >> version >> flags;
    }
    void* p = nullptr;
    int status = -1;
    int rc = gpa(name.c_str(), &p, version, flags, &status);
    Describe(p, &lib, &sym);
    printf("%s %d %llu %d %d %s %s\n", name.empty() ? "<empty>" : name.c_str(), version,
           static_cast<unsigned long long>(flags), rc, status, lib.c_str(), sym.c_str());
    // Like the runtime: after fetching cuGetProcAddress@12000, use it for everything else.
    if (name == "cuGetProcAddress" && version == 12000 && rc == 0 && p != nullptr)
      gpa = reinterpret_cast<GetProcV2>(p);
  }
  return 0;
}
