// Shared by the libFuzzer targets: readers that take a path get the input as a file.
#pragma once
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace collscope::fuzz {

// Writes the input to one file per process (under $TMPDIR, or /tmp) named `name`, and returns
// its path: the name decides what some readers expect (.gz, a rank suffix).
inline std::string AsFile(const uint8_t* data, size_t size, const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/collscope-fuzz-" + std::to_string(getpid());
  static bool made = false;
  if (!made) made = std::system(("mkdir -p '" + dir + "'").c_str()) == 0;
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace collscope::fuzz
