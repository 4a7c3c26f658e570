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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; any other parse error is a usage error, status 2
    // (docs/cli.md), never CLI11's own codes (106, 109...) that no script could anticipate.
    return app.exit(e) == 0 ? 0 : 2;
  }
  return collscope::cli::g_exit_code;
}
