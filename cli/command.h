// Subcommands register themselves here; each lives in its own *_cmd.cc and stays thin: it parses
// arguments and calls a library function. Each keeps its names in a namespace named after its
// file, not an anonymous one: the binary compiles them as one unity translation unit
// (cli/CMakeLists.txt).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace collscope::cli {

// Adds a subcommand to `app`; the callback set on the subcommand returns the process exit code
// through SetExitCode.
using CommandRegistrar = void (*)(CLI::App& app);

std::vector<CommandRegistrar>& Registry();
void SetExitCode(int code);

struct RegisterCommand {
  explicit RegisterCommand(CommandRegistrar r) { Registry().push_back(r); }
};

}  // namespace collscope::cli
