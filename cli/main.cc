#include <cstdio>

#include "cli/command.h"
#include "collscope/version.h"  // generated (cmake/Version.cmake)

namespace collscope::cli {
int g_exit_code = 0;
std::vector<CommandRegistrar>& Registry() {
  static std::vector<CommandRegistrar> registry;
  return registry;
}
void SetExitCode(int code) { g_exit_code = code; }
}  // namespace collscope::cli

int main(int argc, char** argv) {
  CLI::App app{"collscope: observe and diagnose collective communication in large training jobs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "collscope " COLLSCOPE_VERSION_FULL);
  for (auto registrar : collscope::cli::Registry()) registrar(app);
  CLI11_PARSE(app, argc, argv);
  return collscope::cli::g_exit_code;
}
