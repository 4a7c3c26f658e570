// What the launcher (torchrun, Open MPI, Slurm, PMI) says of this process, for every capture
// library: header-only, no dependency but the C library.
#ifndef COLLSCOPE_CAPTURE_COMMON_LAUNCHER_ENV_H_
#define COLLSCOPE_CAPTURE_COMMON_LAUNCHER_ENV_H_

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>

namespace collscope::capture {

// The first of `names` set to an integer in [0, 2^30), else `def`.
inline int32_t FirstEnvInt(std::initializer_list<const char*> names, int32_t def = -1) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    errno = 0;
    const long x = std::strtol(v, &end, 10);
    if (errno == 0 && *end == '\0' && x >= 0 && x < (1L << 30)) return static_cast<int32_t>(x);
  }
  return def;
}

inline int32_t LauncherRank() { return FirstEnvInt({"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"}); }
inline int32_t LauncherLocalRank() {
  return FirstEnvInt({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"});
}
inline int32_t LauncherWorldSize() {
  return FirstEnvInt({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"});
}

}  // namespace collscope::capture

#endif  // COLLSCOPE_CAPTURE_COMMON_LAUNCHER_ENV_H_
