// The built libgpushare-cuda.so loads into any glibc 2.17+ image: every versioned reference is
// GLIBC_2.17 or older, the old-glibc homes of dlsym and the robust mutexes (libdl.so.2,
// libpthread.so.0) are dependencies, and there is no C++ runtime (libstdc++, libgcc_s) to
// carry. Read straight from the ELF file (dynamic section and .gnu.version_r).
#include <elf.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/interpose/probe.h"

namespace gpushare::interpose::testing {
namespace {

struct Elf {
  std::vector<char> bytes;
  const Elf64_Ehdr* eh() const { return reinterpret_cast<const Elf64_Ehdr*>(bytes.data()); }
  const Elf64_Shdr* sh(int i) const {
    return reinterpret_cast<const Elf64_Shdr*>(bytes.data() + eh()->e_shoff +
                                               i * eh()->e_shentsize);
  }
  const char* str(int section, uint64_t off) const {
    return bytes.data() + sh(section)->sh_offset + off;
  }
};

bool Load(const std::string& path, Elf* e) {
  std::ifstream in(path, std::ios::binary);
  e->bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return e->bytes.size() > sizeof(Elf64_Ehdr) && memcmp(e->bytes.data(), ELFMAG, SELFMAG) == 0 &&
         e->eh()->e_ident[EI_CLASS] == ELFCLASS64;
}

// "GLIBC_2.17" -> {2, 17}
std::pair<int, int> Version(const std::string& v) {
  int a = 0, b = 0;
  sscanf(v.c_str() + v.find('_') + 1, "%d.%d", &a, &b);
  return {a, b};
}

std::set<std::string> Exports(const Elf& e) {
  std::set<std::string> out;
  for (int i = 0; i < e.eh()->e_shnum; ++i) {
    const Elf64_Shdr* s = e.sh(i);
    if (s->sh_type != SHT_DYNSYM) continue;
    auto* sym = reinterpret_cast<const Elf64_Sym*>(e.bytes.data() + s->sh_offset);
    size_t n = s->sh_size / sizeof(Elf64_Sym);
    for (size_t k = 1; k < n; ++k)
      if (sym[k].st_shndx != SHN_UNDEF && ELF64_ST_BIND(sym[k].st_info) != STB_LOCAL)
        out.insert(e.str(static_cast<int>(s->sh_link), sym[k].st_name));
  }
  return out;
}

TEST(SymbolVersions, LoadsOnGlibc217WithoutACppRuntime) {
  Elf e;
  ASSERT_TRUE(Load(InterposerPath(), &e)) << InterposerPath();
  std::set<std::string> needed, versions, exported;
  for (int i = 0; i < e.eh()->e_shnum; ++i) {
    const Elf64_Shdr* s = e.sh(i);
    if (s->sh_type == SHT_DYNAMIC) {
      auto* d = reinterpret_cast<const Elf64_Dyn*>(e.bytes.data() + s->sh_offset);
      for (; d->d_tag != DT_NULL; ++d)
        if (d->d_tag == DT_NEEDED)
          needed.insert(e.str(static_cast<int>(s->sh_link), d->d_un.d_val));
    } else if (s->sh_type == SHT_GNU_verneed) {
      const char* base = e.bytes.data() + s->sh_offset;
      const char* vn = base;
      for (;;) {
        auto* need = reinterpret_cast<const Elf64_Verneed*>(vn);
        const char* va = vn + need->vn_aux;
        for (int k = 0; k < need->vn_cnt; ++k) {
          auto* aux = reinterpret_cast<const Elf64_Vernaux*>(va);
          versions.insert(e.str(static_cast<int>(s->sh_link), aux->vna_name));
          va += aux->vna_next;
        }
        if (need->vn_next == 0) break;
        vn += need->vn_next;
      }
    }
  }
  exported = Exports(e);
  EXPECT_FALSE(versions.empty());
  for (const std::string& v : versions) {
    ASSERT_EQ(v.rfind("GLIBC_", 0), 0u) << "unexpected version dependency " << v;
    EXPECT_LE(Version(v), std::make_pair(2, 17)) << v << " is newer than glibc 2.17";
  }
  EXPECT_EQ(needed.count("libstdc++.so.6"), 0u);
  EXPECT_EQ(needed.count("libgcc_s.so.1"), 0u);
  EXPECT_EQ(needed.count("libm.so.6"), 0u);
  EXPECT_EQ(needed.count("libdl.so.2"), 1u) << "where dlsym@GLIBC_2.2.5 lives before glibc 2.34";
  EXPECT_EQ(needed.count("libpthread.so.0"), 1u);
  for (const std::string& n : needed)
    EXPECT_TRUE(n == "libc.so.6" || n == "libdl.so.2" || n == "libpthread.so.0" ||
                n.rfind("ld-linux", 0) == 0)
        << "unexpected dependency " << n;
  // Only the wrappers and dlsym are exported: nothing of the implementation leaks.
  for (const std::string& s : exported)
    EXPECT_TRUE(s == "dlsym" || s.rfind("cu", 0) == 0 || s.rfind("nvmlDeviceGetMemoryInfo", 0) == 0)
        << s;
  EXPECT_EQ(exported.count("dlsym"), 1u);
  EXPECT_EQ(exported.count("cuGetProcAddress_v2"), 1u);
}

// The fake driver exports what the real one does: every name of the CUDA 13.0 stub (checked
// against the stub itself where the toolkit is installed) plus the graphics-interop names the
// stub omits, and its fakecuda_* control functions. Nothing else.
TEST(FakeDriver, ExportsTheDriversSymbols) {
  Elf fake;
  ASSERT_TRUE(Load(FakesDir() + "/cuda/libcuda.so.1", &fake));
  std::set<std::string> names;
  for (const std::string& n : Exports(fake))
    if (n.rfind("fakecuda_", 0) != 0) names.insert(n);
  std::set<std::string> expected;
#define GPUSHARE_CUDA_EXPORT(name) expected.insert(#name);
#include "interpose/generated/libcuda_exports.inc"
#undef GPUSHARE_CUDA_EXPORT
  EXPECT_EQ(names, expected);
  Elf stub;
  if (!Load("/usr/local/cuda/lib64/stubs/libcuda.so", &stub))
    GTEST_SKIP() << "SKIPPED: no CUDA toolkit stub";
  for (const std::string& n : Exports(stub)) EXPECT_EQ(names.count(n), 1u) << n;
}

}  // namespace
}  // namespace gpushare::interpose::testing
